/**
 * Dry runs (docs/api.md, "Dry runs"): what an `update` or a `drain` would do, computed without
 * changing the host or recording an operation. An update's plan lists the phases that would
 * run, what changes, which files would be written and removed, and the preflight checks the
 * update would run (reachability, no download); a preflight that would fail makes the plan
 * `failed` with the code the update would end with. A drain's is the drain's own dry run
 * (which pods would be evicted, skipped or refused).
 */
import type { HostPaths } from '../host/paths.js';
import type { Clock, MachineName } from '../host/types.js';
import { serializeAgentConfig, type AgentConfig } from '../config/agent-config.js';
import { sha256Hex } from './applied-config-store.js';
import { dryRunDrain, type DrainRequest, type NodeDrainOps } from './drain-ops.js';
import type { ConfigChange } from './goal.js';
import type { Operation } from './operation.js';
import type { Provisioner } from '../provision/provisioner-contract.js';
import { UPDATE_PHASES, preflightFailureCode } from './update.js';

/** How long a dry run's preflight checks may take. */
export const DRY_RUN_PREFLIGHT_MS = 60_000;

export interface DryRunInput {
  source: MachineName | null;
  target: MachineName;
  goal: AgentConfig;
  changes: ConfigChange[];
  changed: boolean;
  drain: boolean;
  /** The update would pass the fleet gate (the `slot` phase): a gate is wired and not ignored. */
  fleet: boolean;
  /** A health gate applies now (a fleet policy with health checks): the `health` phase would run. */
  healthGate: boolean;
  /** The switch order is `standby` (the `standby` phase would run when there is a source). */
  standby: boolean;
  now: string;
  paths: HostPaths;
  provisioner: Pick<Provisioner, 'plannedFiles'>;
}

/** Fill `op` (a fresh update record) as the succeeded dry run whose result is the plan. */
export function buildDryRun(op: Operation, d: DryRunInput): Operation {
  op.state = 'succeeded';
  op.startedAt = d.now;
  op.finishedAt = d.now;
  const skipped = new Set([
    ...(d.drain ? [] : ['drain', 'uncordon']),
    ...(d.fleet ? [] : ['slot']),
    ...(d.source ? [] : ['stop', 'cleanup']),
    ...(d.source && d.standby ? [] : ['standby']),
    ...(d.healthGate ? [] : ['health']),
  ]);
  op.phases = op.phases.map((p) => ({ ...p, state: skipped.has(p.name) ? 'skipped' : 'pending' }));
  op.result = {
    dryRun: true,
    changed: d.changed,
    plan: {
      from: d.source,
      to: d.changed ? d.target : d.source,
      switchOrder: d.source && d.standby ? 'standby' : 'cold',
      changes: d.changes,
      phases: op.phases.filter((p) => p.state === 'pending').map((p) => p.name),
      files: d.changed ? d.provisioner.plannedFiles(d.target, d.goal) : [],
      removes: d.changed && d.source ? [d.paths.machineDir(d.source), d.paths.appliedConfig(d.source)] : [],
      configHash: sha256Hex(serializeAgentConfig(d.goal)),
    },
  };
  return op;
}

export interface DryRunDeps {
  paths: HostPaths;
  provisioner: Pick<Provisioner, 'preflight' | 'plannedFiles'>;
  clock: Pick<Clock, 'now'>;
}

/** What the engine decided of an update before planning it (see `DryRunInput`). */
export type UpdatePlanInput = Omit<DryRunInput, 'now' | 'paths' | 'provisioner'>;

/**
 * The dry run of an update: when something would change, the preflight checks the update
 * would run first, then the plan, in the record `create` makes (a fresh update record with the
 * phases given, never recorded).
 */
export async function planUpdate(
  d: DryRunDeps,
  p: UpdatePlanInput,
  create: (to: MachineName | null, phases: readonly string[]) => Operation,
): Promise<Operation> {
  const checks = p.changed
    ? await d.provisioner.preflight(p.goal, AbortSignal.timeout(DRY_RUN_PREFLIGHT_MS))
    : [];
  const op = create(p.changed ? p.target : p.source, p.changed ? UPDATE_PHASES : []);
  const plan = buildDryRun(op, {
    ...p,
    now: new Date(d.clock.now()).toISOString(),
    paths: d.paths,
    provisioner: d.provisioner,
  });
  if (p.changed) (plan.result ??= {}).preflight = checks;
  const failed = checks.filter((c) => !c.ok);
  if (failed.length > 0) {
    // The update would fail in preflight: say so with the code the update would end with.
    plan.state = 'failed';
    plan.error = {
      code: preflightFailureCode(failed),
      message: `preflight would fail: ${failed.map((c) => `${c.name}: ${c.message}`).join('; ')}`,
      data: { checks: failed },
    };
  }
  return plan;
}

/** The dry run of a drain, in `op` (a fresh drain record with no phases, never recorded). */
export async function planDrain(
  ops: NodeDrainOps,
  req: DrainRequest,
  op: Operation,
  clock: Pick<Clock, 'now'>,
): Promise<Operation> {
  const started = new Date(clock.now()).toISOString();
  op.result = await dryRunDrain(ops, req);
  Object.assign(op, {
    state: 'succeeded',
    startedAt: started,
    finishedAt: new Date(clock.now()).toISOString(),
  });
  return op;
}
