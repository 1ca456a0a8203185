/**
 * The plan of a dry-run update: the phases that would run, what changes, which files would be
 * written and removed — computed without touching the host.
 */
import type { HostPaths } from '../host/paths.js';
import type { MachineName } from '../host/types.js';
import { serializeAgentConfig, type AgentConfig } from '../config/agent-config.js';
import { sha256Hex } from './applied-config-store.js';
import type { ConfigChange } from './goal.js';
import type { Operation } from './operation.js';
import type { Provisioner } from '../provision/provisioner-contract.js';

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
    ...(d.healthGate ? [] : ['health']),
  ]);
  op.phases = op.phases.map((p) => ({ ...p, state: skipped.has(p.name) ? 'skipped' : 'pending' }));
  op.result = {
    dryRun: true,
    changed: d.changed,
    plan: {
      from: d.source,
      to: d.changed ? d.target : d.source,
      changes: d.changes,
      phases: op.phases.filter((p) => p.state === 'pending').map((p) => p.name),
      files: d.changed ? d.provisioner.plannedFiles(d.target, d.goal) : [],
      removes: d.changed && d.source ? [d.paths.machineDir(d.source), d.paths.appliedConfig(d.source)] : [],
      configHash: sha256Hex(serializeAgentConfig(d.goal)),
    },
  };
  return op;
}
