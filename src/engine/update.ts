/**
 * The update procedure (docs/architecture.md): provision and stage the target beside the serving source,
 * boot it in standby beside it (the standby order), then the short down window — stop(source),
 * start(target), verify, the health gate — then commit and clean up. Failure before stop removes
 * the target (the node never stopped serving); failure in start, verify or health rolls back to the
 * source. Every phase transition is journaled before it happens.
 *
 * The two switch orders (docs/architecture.md, "Hot standby"): `standby` boots the target before the
 * node goes down, so the window holds only kubelet and containerd moving from one booted machine to
 * the other, and a rollback moves them back without a boot; `cold` stops the source machine and
 * boots the target inside the window.
 */
import {
  AgentError,
  CancelledError,
  MachineStartFailedError,
  RollbackFailedError,
  StateConflictError,
  VerifyFailedError,
  describeError,
  isAgentError,
} from '../errors.js';
import type { MachineDiagnostic } from '../host/machine-diagnostics.js';
import type { MachineManager } from '../host/machines.js';
import type { Clock, MachineName } from '../host/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { AgentConfig } from '../config/agent-config.js';
import type { DaemonConfig } from '../config/daemon-config.js';
import type { AppliedConfigStore } from './applied-config-store.js';
import type { GoalSet } from './goal.js';
import type { DeferredWrites } from './deferred-writes.js';
import {
  describeNode,
  observeHost,
  observeMachine,
  refuseDestroy,
  stopConfirmed,
  type HostFacts,
} from './host-truth.js';
import { writeNodeStateOn } from './node-state.js';
import type { StateReserve } from './reserve.js';
import type { OperationRecorder } from './operation-recorder.js';
import { toErrorInfo } from './operation-recorder.js';
import type { OperationState, OperationWait } from './operation.js';
import type { Provisioner } from '../provision/provisioner-contract.js';
import { failpoint } from '../host/failpoints.js';
import { JournalWriter, type JournalWriteMode } from './switch-journal.js';
import type { TaskContext } from '../tasks/tasks.js';

export const UPDATE_PHASES = [
  'preflight',
  'provision',
  'stage',
  'standby',
  'slot',
  'drain',
  'stop',
  'start',
  'verify',
  'health',
  'commit',
  'cleanup',
  'uncordon',
] as const;
export type UpdatePhase = (typeof UPDATE_PHASES)[number];

/** How an update switches machines (`--switch-order`; docs/architecture.md, "Hot standby"). */
export type SwitchOrder = DaemonConfig['switchOrder'];

/**
 * The memory that must be available (MemAvailable) before the target boots in standby
 * (docs/architecture.md, "Hot standby"). A machine booted in standby held 21 MiB (PSS; 4.7 MiB of
 * it anonymous) on the real host (bench/real-down-window.ts); a production image's sysinit holds
 * more, and the serving machine must not be pushed into reclaim for it: about twelve times that.
 */
export const STANDBY_MEMORY_BYTES = 256 * 1024 ** 2;

/** What the health gate checks: the machine that just passed verify and its Kubernetes version. */
export interface HealthGateTarget {
  machine: MachineName;
  /** The target Kubernetes version, with or without its leading `v`. */
  kubernetesVersion: string;
}

/** The health gate bound to the fleet policy of the moment: its report, or HEALTH_GATE_FAILED. */
export type HealthGateRun = (
  target: HealthGateTarget,
  signal: AbortSignal,
) => Promise<Record<string, unknown>>;

/** The health gate after `verify` (docs/fleet.md, "The health gate"); implemented in src/fleet. */
export interface HealthGate {
  /** The gate under the current fleet policy, or null when none applies (the phase is skipped). */
  prepare(): HealthGateRun | null;
}

/** Drain support (the Kubernetes part); absent when agentd has no cluster credentials. */
/** An `update` as the RPC method passes it (the engine's `update`). */
export interface UpdateRequest {
  config?: AgentConfig;
  set?: GoalSet;
  force?: boolean;
  drain?: boolean;
  /** Do not pass the fleet gate (`agentctl update --ignore-fleet`). */
  ignoreFleet?: boolean;
  dryRun?: boolean;
  wait?: boolean;
  idempotencyKey?: string;
  reason?: string;
  requestedBy: string;
}

export interface NodeDrainer {
  /** Cordon and evict; returns whether this call cordoned the node (false when it already was). */
  drain(signal: AbortSignal): Promise<{ cordonedByUs: boolean; result: Record<string, unknown> }>;
  /** Undo a cordon this agent made. */
  uncordon(): Promise<void>;
}

/** Why an update waits in the fleet gate (docs/fleet.md); the operation's `wait` shows it. */
export type FleetWait = OperationWait;

/** A fleet slot this node holds while it updates. */
export interface FleetSlot {
  readonly name: string;
  /** Why the slot was lost while held (taken over after expiry), else null. */
  lostReason(): string | null;
  /** Record the outcome (a failure counts toward the halt) and free the slot. */
  release(outcome: { state: OperationState; operationId: string; message: string | null }): Promise<void>;
}

/** The fleet gate (the Kubernetes part, src/fleet); absent without cluster credentials. */
export interface FleetGate {
  /** Wait for a slot; null when there is no fleet policy (no gate). Rejects CANCELLED on abort. */
  acquire(o: {
    signal: AbortSignal;
    operationId: string;
    onWait: (wait: FleetWait | null) => void;
  }): Promise<FleetSlot | null>;
}

export interface UpdateDeps {
  stateDir: string;
  machines: MachineManager;
  provisioner: Provisioner;
  applied: AppliedConfigStore;
  clock: Clock;
  metrics: Metrics;
  drainer: NodeDrainer | null;
  /** The fleet gate of the `slot` phase; null: the phase is skipped (no Kubernetes). */
  fleet?: FleetGate | null;
  verifyTimeoutMs?: number;
  /** An earlier interrupted operation's uncordon is still pending: carried into this journal. */
  uncordonPending?: boolean;
  /** Capture what explains a machine's failure (journals, unit status); never throws. */
  diagnostics?: ((m: MachineName) => Promise<MachineDiagnostic[]>) | null;
  /**
   * The health gate after `verify` (docs/fleet.md, "The health gate"); null, or a gate whose policy is
   * null (no fleet policy), skips the `health` phase: the update commits once verify passed.
   */
  healthGate?: HealthGate | null;
  /** Space and descriptors held back for the rollback's journal writes and host steps. */
  reserve?: StateReserve;
  /** Where writes that could not be done now are owed (docs/operations.md, "A full disk, exhausted descriptors"). */
  deferred?: DeferredWrites;
  /** Whether a machine's rootfs is on disk (the host checks before a destructive step). */
  onDisk?: (m: MachineName) => Promise<boolean>;
  /** How a switch goes (default `cold`; the daemon passes `--switch-order`, whose default is `standby`). */
  switchOrder?: SwitchOrder;
  /** The host's available memory in bytes (MemAvailable), or null when it cannot be read. */
  memAvailable?: () => Promise<number | null>;
}

export interface UpdatePlan {
  source: MachineName | null;
  target: MachineName;
  config: AgentConfig;
  drain: boolean;
  /** `--ignore-fleet`: do not pass the fleet gate. */
  ignoreFleet?: boolean;
}

/** Raised out of a phase: which phase failed, with the original error as cause. */
class PhaseFailure extends Error {
  constructor(
    readonly phase: UpdatePhase,
    readonly error: unknown,
  ) {
    super(`${phase}: ${describeError(error)}`);
  }
}

export interface UpdateOutcome {
  state: OperationState;
  result: Record<string, unknown>;
  error?: unknown;
}

/**
 * Run an update to the end. `signal` aborts it (cancel, shutdown) only before the source is
 * stopped; the caller refuses cancellation after that.
 */
export async function runUpdate(
  d: UpdateDeps,
  rec: OperationRecorder,
  plan: UpdatePlan,
  signal: AbortSignal,
  hooks: { onPointOfNoReturn?: () => void } = {},
): Promise<UpdateOutcome> {
  const { machines, provisioner, clock } = d;
  const { source, target, config } = plan;
  const now = (): string => new Date(clock.now()).toISOString();
  const journal = new JournalWriter(
    d.stateDir,
    {
      operationId: rec.op.id,
      kind: 'update',
      source,
      target,
      targetHash: null,
      uncordonPending: d.uncordonPending,
    },
    now,
    { reserve: d.reserve, deferred: d.deferred },
  );
  const ctx: TaskContext = {
    signal,
    logger: rec.logger,
    progress: (e) => rec.progress(e),
    metrics: d.metrics,
  };
  const result: Record<string, unknown> = { changed: true, from: source, to: target };
  let downStartedAt: number | null = null;
  /** The standby order needs a source to stand beside; a join boots its only machine. */
  let order: SwitchOrder = source ? (d.switchOrder ?? 'cold') : 'cold';
  /** Whether this update started the target (a join starts it without stopping anything). */
  let targetStarted = false;
  let slot: FleetSlot | null = null;
  /** Free the fleet slot with the outcome; never fails the update (a warning at most). */
  const releaseSlot = async (outcome: UpdateOutcome): Promise<void> => {
    if (slot === null) return;
    const held = slot;
    slot = null;
    const lost = held.lostReason();
    if (lost !== null) ((result.warnings ??= []) as string[]).push(`fleet slot lost while held: ${lost}`);
    try {
      await held.release({
        state: outcome.state,
        operationId: rec.op.id,
        message: outcome.error === undefined ? null : describeError(outcome.error),
      });
    } catch (err) {
      rec.logger.warn({ err: describeError(err), slot: held.name }, 'releasing the fleet slot failed');
    }
  };

  // `fn` may say the phase had nothing to do ('skipped'), e.g. the slot phase without a fleet policy.
  // The journal write of a phase is `required` up to the commit (a phase that cannot be
  // journaled does not run), and `best-effort` once committed: nothing after the commit unmakes it.
  const phase = async (
    name: UpdatePhase,
    fn: () => Promise<unknown>,
    mode: JournalWriteMode = 'required',
  ): Promise<void> => {
    if (signal.aborted)
      throw new PhaseFailure(name, new CancelledError(`update ${name}`, { cause: signal.reason }));
    try {
      await journal.set({ phase: name, phaseState: 'running' }, mode);
    } catch (err) {
      await rec.phaseEnded(name, 'failed', err);
      throw new PhaseFailure(name, err);
    }
    await rec.phaseStarted(name);
    failpoint(`update.${name}.before`);
    let ended: unknown;
    try {
      ended = await fn();
      await journal.set({ phaseState: 'done' }, journal.state.committed ? 'best-effort' : mode);
    } catch (err) {
      const cancelled = signal.aborted && !journal.state.sourceStopped;
      await rec.phaseEnded(name, cancelled ? 'cancelled' : 'failed', err);
      throw new PhaseFailure(name, cancelled ? new CancelledError(`update ${name}`, { cause: err }) : err);
    }
    await rec.phaseEnded(name, ended === 'skipped' ? 'skipped' : 'succeeded');
    failpoint(`update.${name}.after`);
  };
  const observing = { onDisk: d.onDisk, reserve: d.reserve };
  const hostFacts = (): Promise<HostFacts> => observeHost(machines, observing);
  const skip = async (name: UpdatePhase): Promise<void> => rec.phaseEnded(name, 'skipped');

  try {
    await journal.set({});
    await rec.start();
    await phase('preflight', async () => {
      const checks = await provisioner.preflight(config, signal);
      result.preflight = checks;
      const failed = checks.filter((c) => !c.ok);
      if (failed.length > 0) {
        throw new AgentError(
          preflightFailureCode(failed),
          `preflight failed: ${failed.map((c) => `${c.name}: ${c.message}`).join('; ')}`,
          { data: { checks: failed } },
        );
      }
      const t = await machines.inspect(target, signal);
      if (t.running) {
        throw new AgentError(
          'PRECONDITION_FAILED',
          `the target machine ${target} is running; refusing to overwrite it`,
        );
      }
    });
    await phase('provision', async () => {
      const r = await provisioner.provision(target, config, ctx);
      result.imageDigest = r.imageDigest;
      result.downloadedBytes = r.downloadedBytes;
      result.cacheHits = r.cacheHits;
    });
    await phase('stage', () => provisioner.stage(target, config, ctx));
    if (order === 'standby') {
      await phase('standby', async () => {
        // A source that does not run serves nothing: there is no window to shorten.
        const sourceFacts = await observeMachine(machines, source as MachineName, observing);
        if (sourceFacts.known && !sourceFacts.running) {
          order = 'cold';
          result.standby = { skipped: `${source} does not run: there is nothing to stand beside` };
          return 'skipped';
        }
        const shortfall = await standbyShortfall(d);
        if (shortfall !== null) {
          // Not a failure: the update goes on in the cold order, and says why.
          order = 'cold';
          ((result.warnings ??= []) as string[]).push(describeError(shortfall));
          result.standby = { skipped: describeError(shortfall), code: 'INSUFFICIENT_MEMORY' };
          rec.logger.warn({ err: describeError(shortfall) }, 'switching in the cold order');
          return 'skipped';
        }
        await journal.set({ switchOrder: 'standby' });
        targetStarted = true;
        try {
          await provisioner.setStandbyBoot(target, true);
          failpoint('update.standby.mid');
          // Not enabled: a host reboot now boots the source alone.
          await machines.start(target, signal, { enable: false });
        } catch (err) {
          throw err instanceof CancelledError ? err : new MachineStartFailedError(target, err);
        }
      });
    } else {
      await skip('standby');
    }
    result.switchOrder = order;
    if (d.fleet && !plan.ignoreFleet) {
      const gate = d.fleet;
      await phase('slot', async () => {
        slot = await gate.acquire({
          signal,
          operationId: rec.op.id,
          onWait: (w) => {
            // Showing the wait is best effort: a failed write never fails the update.
            rec
              .setWait(w)
              .catch((err: unknown) =>
                rec.logger.warn({ err: describeError(err) }, 'recording the fleet wait'),
              );
          },
        });
        if (slot === null) return 'skipped'; // no fleet policy: no gate
        result.fleet = { slot: slot.name };
      });
    } else {
      await skip('slot');
    }
    if (plan.drain && d.drainer) {
      const drainer = d.drainer;
      await phase('drain', async () => {
        const r = await drainer.drain(signal);
        await journal.set({ cordonedByUs: r.cordonedByUs });
        result.drain = r.result;
      });
    } else {
      await skip('drain');
    }
    if (source) {
      await phase('stop', async () => {
        // From here the node may be down, and the update can no longer be cancelled.
        hooks.onPointOfNoReturn?.();
        await journal.set({ sourceStopped: true });
        downStartedAt = clock.now();
        if (order === 'standby') {
          // The source stays booted (a rollback needs no boot); kubelet stopped, or this throws.
          await onReserve(d, () => machines.stopServices(source));
          return;
        }
        // Confirmed: a stop whose commands could not run must not leave two machines running.
        await stopConfirmed(machines, source, { onDisk: d.onDisk, reserve: d.reserve });
      });
    } else {
      await skip('stop');
    }
    const never = new AbortController().signal;
    await phase('start', async () => {
      targetStarted = true;
      try {
        if (order === 'standby') {
          // Booted already: its next boot is a normal one, then its services and normal target.
          await provisioner.setStandbyBoot(target, false);
        } else {
          await machines.start(target, source ? never : signal);
        }
        failpoint('update.start.mid');
        await machines.startServices(target, source ? never : signal);
      } catch (err) {
        // A cancelled join stays CANCELLED; anything else is this machine not starting.
        throw err instanceof CancelledError ? err : new MachineStartFailedError(target, err);
      }
    });
    await phase('verify', async () => {
      try {
        await machines.verify(target, { timeoutMs: d.verifyTimeoutMs, signal: source ? never : signal });
      } catch (err) {
        // Whatever kept kubelet from being seen healthy (a probe that could not run) is VERIFY_FAILED.
        if (err instanceof CancelledError || (isAgentError(err) && err.code === 'VERIFY_FAILED')) throw err;
        throw new VerifyFailedError(`verify machine ${target}: ${describeError(err)}`, {
          cause: err,
          data: { machine: target, causeCode: isAgentError(err) ? err.code : 'INTERNAL' },
        });
      }
      if (downStartedAt !== null) {
        const ms = clock.now() - downStartedAt;
        result.downWindowMs = ms;
        d.metrics.downWindow.observe(ms / 1000);
      }
    });
    const gate = d.healthGate?.prepare() ?? null;
    if (gate !== null) {
      await phase('health', async () => {
        result.healthGate = await gate(
          { machine: target, kubernetesVersion: config.Cluster.Version },
          source ? never : signal,
        );
      });
    } else {
      await skip('health');
    }
    // A join has no source to stop: its point of no return is the commit.
    hooks.onPointOfNoReturn?.();
    await phase('commit', async () => {
      if (order === 'standby' && source) {
        // Booted at host start from now on: the target, not the source (never both).
        await machines.setEnabled(source, false);
        await machines.setEnabled(target, true);
      }
      // The commit point: the target's applied config (+ sidecar) on disk, then the journal.
      const hash = await d.applied.write(target, config);
      failpoint('update.commit.mid');
      // The commit point; on the reserve when the disk is full. When even that fails, the
      // update is not committed and rolls back.
      await journal.set({ committed: true, targetHash: hash });
      result.hash = hash;
      // Committed: the node state follows, owed when it cannot be written now.
      await writeNodeStateOn(d.stateDir, target, new Date(clock.now()), d);
    });
  } catch (failure) {
    const f = failure instanceof PhaseFailure ? failure : new PhaseFailure('preflight', failure);
    if (!journal.state.committed) {
      let outcome: UpdateOutcome;
      try {
        outcome = await handleFailure(d, rec, plan, journal, f, result, targetStarted);
      } catch (err) {
        // Never an ending without the node's state, even when undoing failed unexpectedly.
        rec.logger.error({ err: describeError(err) }, 'undoing the failed update failed');
        outcome = { state: 'failed', result, error: f.error };
      }
      await releaseSlot(outcome);
      await journal.close(outcome.state);
      // A rollback verified the source moments ago: when the host cannot be asked again now (no
      // descriptor left), that verification is what the ending says, and says so.
      const verified = outcome.state === 'rolled_back' ? source : null;
      return { ...outcome, error: withNodeState(outcome.error, await hostFacts(), verified) };
    }
    // Committed: a failure recording the end of the commit does not unmake it.
    result.warnings = [`the commit of ${target} was not fully recorded: ${describeError(f.error)}`];
  }

  // Committed: the node runs the target. What follows tidies up; a failure there is a warning.
  const warnings: string[] = Array.isArray(result.warnings) ? (result.warnings as string[]) : [];
  if (source) {
    try {
      await phase(
        'cleanup',
        async () => {
          // Never remove a machine that serves the node on the journal's word alone.
          const facts = await hostFacts();
          const refused = refuseDestroy(source, facts);
          if (refused !== null)
            throw new StateConflictError(`refusing to remove ${source}: ${refused}`, {
              data: { machine: source },
            });
          if (facts[source].running) {
            // Still booted after a standby switch: powered off now, outside the down window.
            await stopConfirmed(machines, source, { onDisk: d.onDisk, reserve: d.reserve });
            await journal.set({ sourcePoweredOff: true }, 'best-effort');
          }
          failpoint('update.cleanup.before-remove');
          await onReserve(d, () => machines.remove(source));
          failpoint('update.cleanup.mid');
          await provisioner.removeMachineFiles(source);
          await d.applied.remove(source);
          await machines.daemonReload();
        },
        'best-effort',
      );
    } catch (err) {
      warnings.push(
        `cleanup of ${source} failed (recovery retries it at the next start): ${describeError(err)}`,
      );
    }
  } else {
    await skip('cleanup');
  }
  if (journal.state.cordonedByUs && d.drainer) {
    const drainer = d.drainer;
    try {
      await phase('uncordon', () => drainer.uncordon(), 'best-effort');
    } catch (err) {
      warnings.push(`uncordon failed: ${describeError(err)}`);
    }
  } else {
    await skip('uncordon');
  }
  if (warnings.length > 0) result.warnings = warnings;
  await releaseSlot({ state: 'succeeded', result });
  await journal.close('succeeded');
  return { state: 'succeeded', result };
}

/**
 * Why the target may not boot in standby now (INSUFFICIENT_MEMORY), or null when it may: the host
 * must have STANDBY_MEMORY_BYTES available, and say so.
 */
async function standbyShortfall(d: Pick<UpdateDeps, 'memAvailable'>): Promise<AgentError | null> {
  const need = STANDBY_MEMORY_BYTES;
  let available: number | null = null;
  let why = 'the host did not say';
  try {
    available = d.memAvailable ? await d.memAvailable() : null;
  } catch (err) {
    why = describeError(err);
  }
  if (available !== null && available >= need) return null;
  const mib = (n: number): string => `${Math.floor(n / 1024 ** 2)} MiB`;
  const found =
    available === null ? `its available memory could not be read (${why})` : `${mib(available)} is available`;
  return new AgentError(
    'INSUFFICIENT_MEMORY',
    `standby needs ${mib(need)} of available memory for a second booted machine, and ${found}; switching in the cold order`,
    { data: { neededBytes: need, availableBytes: available } },
  );
}

/** Run a host step; when it fails for want of space or descriptors, once more on the reserve. */
function onReserve<T>(d: Pick<UpdateDeps, 'reserve'>, fn: () => Promise<T>): Promise<T> {
  return d.reserve ? d.reserve.retry(fn) : fn();
}

/**
 * The operation's error with what serves the node now, in its message and `data.node`: every
 * ending says it (docs/operations.md, "A full disk, exhausted descriptors").
 */
export function withNodeState(err: unknown, read: HostFacts, verified: MachineName | null = null): unknown {
  if (err === undefined) return err;
  const fallback = verified !== null && !read[verified].known;
  const facts: HostFacts = fallback
    ? { ...read, [verified]: { name: verified, known: true, exists: true, running: true, serving: true } }
    : read;
  const sentence = fallback
    ? `${describeNode(facts)}, as the rollback verified it (the host could not be asked again: ${read[verified].error ?? 'inspect failed'})`
    : describeNode(facts);
  const node = Object.fromEntries(
    Object.values(facts).map((f) => [
      f.name,
      f.known ? (f.serving ? 'serving' : f.running ? 'running' : f.exists ? 'stopped' : 'absent') : 'unknown',
    ]),
  );
  const code = isAgentError(err) ? err.code : 'INTERNAL';
  const data = isAgentError(err) ? err.data : {};
  return new AgentError(code, `${describeError(err)}; ${sentence}`, { cause: err, data: { ...data, node } });
}

async function handleFailure(
  d: UpdateDeps,
  rec: OperationRecorder,
  plan: UpdatePlan,
  journal: JournalWriter,
  failure: PhaseFailure,
  result: Record<string, unknown>,
  targetStarted: boolean,
): Promise<UpdateOutcome> {
  const { machines, provisioner } = d;
  const { source, target } = plan;
  const steps: Array<{ step: string; ok: boolean; error?: string }> = [];
  // Every step is tried, each on the reserve when space or descriptors ran out: recording
  // never stands in the way of bringing the node back.
  const attempt = async (step: string, fn: () => Promise<void>): Promise<boolean> => {
    try {
      await onReserve(d, fn);
      steps.push({ step, ok: true });
      return true;
    } catch (err) {
      steps.push({ step, ok: false, error: describeError(err) });
      rec.logger.warn({ step, err: describeError(err) }, 'undo step failed');
      return false;
    }
  };
  const observing = { onDisk: d.onDisk, reserve: d.reserve };
  const facts = (): Promise<HostFacts> => observeHost(machines, observing);
  /** Whether `m` may be stopped and removed now; a refusal is a failed step saying why. */
  const mayDestroy = async (m: MachineName, neverStarted: boolean): Promise<boolean> => {
    const refused = refuseDestroy(m, await facts(), { neverStarted });
    if (refused === null) return true;
    steps.push({ step: `remove ${m}`, ok: false, error: `refused: ${refused}` });
    rec.logger.warn({ machine: m, reason: refused }, 'refusing to stop or remove a machine');
    return false;
  };
  const removeTarget = async (): Promise<void> => {
    await attempt(`remove ${target}`, () => machines.remove(target));
    await attempt(`remove ${target} nspawn files`, () => provisioner.removeMachineFiles(target));
    await attempt(`remove ${target} applied config`, () => d.applied.remove(target));
    await attempt('daemon-reload', () => machines.daemonReload());
  };
  const uncordon = async (): Promise<void> => {
    if (journal.state.cordonedByUs && d.drainer) {
      const drainer = d.drainer;
      await attempt('uncordon', () => drainer.uncordon());
    }
  };
  // The phases that never ran.
  rec.skipPending();
  // The target started (or tried to): keep what explains its failure before it is removed.
  let diagnostics: MachineDiagnostic[] | undefined;
  if (
    (failure.phase === 'standby' ||
      failure.phase === 'start' ||
      failure.phase === 'verify' ||
      failure.phase === 'health') &&
    d.diagnostics
  ) {
    diagnostics = await d.diagnostics(target).catch(() => []);
    if (isAgentError(failure.error)) failure.error.data.diagnostics = diagnostics;
    else result.diagnostics = diagnostics;
  }

  if (!journal.state.sourceStopped) {
    // Before stop: the node never stopped serving. Undo what was done on the target — never a
    // target that runs when this update did not start it (a node.json naming the wrong machine).
    // A target it started itself (a join: nothing else served) is its own to undo.
    if (targetStarted || (await mayDestroy(target, true))) {
      await attempt(`stop ${target}`, () => stopConfirmed(machines, target, observing));
      await removeTarget();
    }
    await uncordon();
    result.undo = steps;
    const cancelled = failure.error instanceof CancelledError;
    return { state: cancelled ? 'cancelled' : 'failed', result, error: failure.error };
  }

  // After stop, before commit: bring the source back. The journal is written best-effort.
  await rec.phaseStarted('rollback');
  await journal.set({ phase: 'rollback', phaseState: 'running' }, 'best-effort');
  failpoint('update.rollback.before');
  const before = await facts();
  // A source the host does not have cannot come back: the target is not stopped for it.
  const sourceMissing = source !== null && before[source].known && !before[source].exists;
  // Still booted (the standby order): kubelet and containerd move back, no machine boots.
  const sourceBooted =
    journal.state.switchOrder === 'standby' &&
    source !== null &&
    before[source].known &&
    before[source].running;
  if (sourceMissing) {
    steps.push({
      step: `start ${source}`,
      ok: false,
      error: `the host has no machine ${source}; ${target} is left as it is`,
    });
  } else if (!(
    sourceBooted && (await attempt(`stop services in ${target}`, () => machines.stopServices(target)))
  )) {
    await attempt(`stop ${target}`, () => stopConfirmed(machines, target, observing));
  }
  failpoint('update.rollback.mid');
  const back =
    source !== null &&
    !sourceMissing &&
    (sourceBooted
      ? // Booted through the switch: only a failed commit may have taken it out of machines.target.
        failure.phase !== 'commit' ||
        (await attempt(`enable ${source}`, () => machines.setEnabled(source, true)))
      : await attempt(`start ${source}`, () => machines.start(source))) &&
    (await attempt(`start services in ${source}`, () => machines.startServices(source))) &&
    (await attempt(`verify ${source}`, () => machines.verify(source, { timeoutMs: d.verifyTimeoutMs })));
  if (back && (await mayDestroy(target, false))) {
    // A target whose services were stopped still runs: powered off before it is removed.
    if ((await facts())[target].running)
      await attempt(`stop ${target}`, () => stopConfirmed(machines, target, observing));
    await removeTarget();
  }
  await uncordon();
  result.rollback = steps;
  const failedStep = steps.find((s) => !s.ok && s.step.includes(source ?? ''));
  const rollbackError = failedStep ? `${failedStep.step}: ${failedStep.error ?? 'failed'}` : 'unknown';
  await rec.phaseEnded(
    'rollback',
    back ? 'succeeded' : 'failed',
    back
      ? undefined
      : new RollbackFailedError(`rollback to ${source ?? '-'} failed: ${rollbackError}`, {
          data: { machine: source, steps },
        }),
  );
  await journal.set({ phaseState: 'done' }, 'best-effort');
  failpoint('update.rollback.after');
  if (back) return { state: 'rolled_back', result, error: failure.error };
  const both = new RollbackFailedError(
    `${failure.message}; rollback to ${source ?? '-'} failed too: ${rollbackError}`,
    { data: { failure: withoutDiagnostics(toErrorInfo(failure.error)), rollback: steps, diagnostics } },
  );
  return { state: 'failed', result, error: both };
}

/**
 * The code of a failed preflight, from its failed checks (docs/operations.md): an unreachable
 * image is IMAGE_PULL_FAILED, an unreachable artifact or mirror DOWNLOAD_FAILED, too little disk
 * NO_SPACE; anything else PRECONDITION_FAILED. The image is named first: it is pulled first.
 */
export function preflightFailureCode(failed: ReadonlyArray<{ name: string }>): AgentError['code'] {
  const has = (test: (name: string) => boolean): boolean => failed.some((c) => test(c.name));
  if (has((n) => n === 'image')) return 'IMAGE_PULL_FAILED';
  if (has((n) => n === 'artifacts' || n.startsWith('artifact:'))) return 'DOWNLOAD_FAILED';
  if (has((n) => n === 'disk-space')) return 'NO_SPACE';
  return 'PRECONDITION_FAILED';
}

/** An error record without its diagnostics (kept once, at the top of the operation's error). */
function withoutDiagnostics(info: ReturnType<typeof toErrorInfo>): ReturnType<typeof toErrorInfo> {
  if (!info.data || !('diagnostics' in info.data)) return info;
  const { diagnostics: _omitted, ...data } = info.data;
  return { ...info, data };
}
