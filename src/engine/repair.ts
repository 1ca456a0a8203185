/**
 * Repair (docs/operations.md, "Repair"): between requests agentd keeps the node at its desired
 * state. When the active machine is found stopped, or its kubelet not active and healthy, it is
 * started again as an operation of kind `repair`, under the one-operation-at-a-time slot (so a
 * repair never runs beside an update, and an update arriving during a repair is BUSY). Failed
 * repairs are retried after the waits of the one backoff policy (src/retry, `REPAIR_BACKOFF`:
 * capped exponential, the upper half of each wait random); after `maxAttempts` failures in a row
 * agentd stops trying and says so in `status`, until the node serves again, another operation
 * succeeds, or agentd restarts. Every wait is on the injected clock.
 */
import type { Logger } from 'pino';
import {
  BusyError,
  CancelledError,
  DrainingError,
  MachineStartFailedError,
  describeError,
  isAgentError,
} from '../errors.js';
import type { MachineDiagnostic } from '../host/machine-diagnostics.js';
import { failpoint } from '../host/failpoints.js';
import type { MachineManager } from '../host/machines.js';
import type { Clock, MachineName } from '../host/types.js';
import { Backoff, REPAIR_BACKOFF } from '../retry/backoff.js';
import type { NodeStatus, Operation } from './operation.js';
import type { OperationSlot } from './operation-slot.js';
import type { UpdateOutcome } from './update.js';
import type { StatusWarning } from './warnings.js';

export const REPAIR_PHASES = ['start', 'verify'] as const;

export interface RepairPolicy {
  /** How often the node is checked while nothing is wrong (default 30 s). */
  checkIntervalMs: number;
  /**
   * Wait after the first failed repair; doubles after each further one (default 10 s). The
   * waits are src/retry's (`Backoff`): the upper half of each is random.
   */
  baseDelayMs: number;
  /** The longest wait between two repairs (default 5 min). */
  maxDelayMs: number;
  /** Failed repairs in a row after which agentd gives up (default 5). */
  maxAttempts: number;
}

export const DEFAULT_REPAIR_POLICY: Readonly<RepairPolicy> = Object.freeze({
  checkIntervalMs: 30_000,
  baseDelayMs: REPAIR_BACKOFF.baseMs,
  maxDelayMs: REPAIR_BACKOFF.maxMs,
  maxAttempts: 5,
});

/** What `status.node.repair` reports. */
export interface RepairStatus {
  /** `off` (--no-repair), `idle`, `repairing`, `backoff` (waiting to retry), `gave_up`. */
  state: 'off' | 'idle' | 'repairing' | 'backoff' | 'gave_up';
  /** Failed repairs in a row. */
  failures: number;
  /** When the next repair may run (backoff), else null. */
  nextAttemptAt: string | null;
  /** The error of the last failed repair, else null. */
  lastError: string | null;
  /** The id of the last repair operation, else null. */
  lastOperation: string | null;
}

export interface NodeRepairOptions {
  enabled: boolean;
  policy?: Partial<RepairPolicy>;
  slot: OperationSlot;
  machines: MachineManager;
  clock: Clock;
  logger: Logger;
  verifyTimeoutMs?: number;
  diagnostics?: ((m: MachineName) => Promise<MachineDiagnostic[]>) | null;
  /** Re-read the node (also publishes a new snapshot, so `status` shows the repair state). */
  refresh: () => Promise<void>;
  /** Called after every change of the repair status (an input of `status`). */
  onChange?: () => void;
  /** The node as last read, and whether its active machine's applied config is readable. */
  node: () => { node: NodeStatus; configured: boolean };
  /** The most recent finished operation, to notice an operator's update or reset. */
  lastOperation: () => Operation | null;
}

/** What is wrong with the node that a repair can fix, or null. */
export function repairNeeded(node: NodeStatus, configured: boolean): MachineName | null {
  const m = node.activeMachine;
  if (m === null || node.serving || !configured) return null;
  const info = node.machines.find((x) => x.name === m);
  // A machine whose rootfs is gone cannot be started: that needs `update --force`.
  if (!info || info.state === 'absent') return null;
  return m;
}

export class NodeRepair {
  readonly #o: NodeRepairOptions;
  readonly #policy: RepairPolicy;
  /** The streak of failed repairs; its count is `status().failures`. */
  readonly #backoff: Backoff;
  #status: RepairStatus;
  #nextAttemptAt = 0;
  /** The last finished non-repair operation seen: a new one resets a give-up. */
  #seenOperation: string | null = null;

  constructor(options: NodeRepairOptions) {
    this.#o = options;
    this.#policy = { ...DEFAULT_REPAIR_POLICY, ...options.policy };
    this.#backoff = new Backoff({
      baseMs: this.#policy.baseDelayMs,
      maxMs: this.#policy.maxDelayMs,
    });
    this.#status = {
      state: options.enabled ? 'idle' : 'off',
      failures: 0,
      nextAttemptAt: null,
      lastError: null,
      lastOperation: null,
    };
  }

  status(): RepairStatus {
    return this.#status;
  }

  /** What `status` warns while repair waits to try again or has given up, or null. */
  warning(): StatusWarning | null {
    const r = this.#status;
    if (r.state === 'gave_up') {
      return {
        code: 'repair-gave-up',
        operationId: r.lastOperation,
        message: `agentd gave up repairing the node after ${r.failures} failed attempts (${r.lastError ?? 'unknown error'}): fix the cause, then agentctl update --force, or restart agentd to try again`,
      };
    }
    if (r.state === 'backoff') {
      return {
        code: 'repair-backoff',
        operationId: r.lastOperation,
        message: `repair failed ${r.failures} time(s) (${r.lastError ?? 'unknown error'}); next attempt at ${r.nextAttemptAt ?? '-'}`,
      };
    }
    return null;
  }

  /** Check and repair until `signal` aborts; the first check runs at once. Never throws. */
  async run(signal: AbortSignal): Promise<void> {
    if (!this.#o.enabled) return;
    this.#seenOperation = this.#o.lastOperation()?.id ?? null;
    while (!signal.aborted) {
      try {
        await this.check(signal);
      } catch (err) {
        this.#o.logger.warn({ err: describeError(err) }, 'repair check failed');
      }
      const wait =
        this.#status.state === 'backoff'
          ? Math.max(0, this.#nextAttemptAt - this.#o.clock.now())
          : this.#policy.checkIntervalMs;
      await this.#o.clock.sleep(wait, signal).catch(() => undefined);
    }
  }

  /** The machine a disagreement with the host kept from being repaired (logged once). */
  #disagreementLogged: MachineName | null = null;

  /** One check: read the node and repair it when needed and allowed. */
  async check(signal?: AbortSignal): Promise<void> {
    if (!this.#o.enabled || signal?.aborted) return;
    await this.#o.refresh();
    const { node, configured } = this.#o.node();
    const last = this.#o.lastOperation();
    if (last && last.kind !== 'repair' && last.id !== this.#seenOperation) {
      // An operator's update or reset changed the node: start counting afresh.
      this.#seenOperation = last.id;
      if (this.#status.state === 'gave_up' || this.#status.state === 'backoff')
        await this.#set(this.#fresh());
    }
    const m = repairNeeded(node, configured);
    if (m === null) {
      if (node.serving && this.#status.failures > 0) await this.#set(this.#fresh());
      return;
    }
    if (this.#status.state === 'gave_up') return;
    if (this.#o.clock.now() < this.#nextAttemptAt) return;
    // Trust the host over the files: the other machine runs and serves, so the files naming `m`
    // disagree with the host; starting `m` beside it would put two machines on the node.
    const other = node.machines.find((x) => x.name !== m);
    if (other?.state === 'running' && other.kubelet === 'active') {
      if (this.#disagreementLogged !== m) {
        this.#disagreementLogged = m;
        this.#o.logger.warn(
          { machine: m, serving: other.name },
          `not repairing ${m}: node.json names it, but ${other.name} runs and serves (see docs/architecture.md, "Recovery checks")`,
        );
      }
      return;
    }
    this.#disagreementLogged = null;
    await this.#repair(m, node.servingReason ?? 'the node does not serve');
  }

  #fresh(): RepairStatus {
    this.#nextAttemptAt = 0;
    this.#backoff.reset();
    return { ...this.#status, state: 'idle', failures: 0, nextAttemptAt: null, lastError: null };
  }

  async #set(status: RepairStatus): Promise<void> {
    this.#assign(status);
    await this.#o.refresh();
  }

  #assign(status: RepairStatus): void {
    this.#status = status;
    this.#o.onChange?.();
  }

  async #repair(m: MachineName, why: string): Promise<void> {
    const { slot } = this.#o;
    let op: Operation;
    const before = this.#status;
    try {
      op = await slot.admit(async () => {
        const created = slot.create('repair', { requestedBy: 'agentd', reason: why }, m, m, REPAIR_PHASES);
        this.#assign({ ...this.#status, state: 'repairing', lastOperation: created.id });
        return slot.launch(created, (rec, opSignal) => this.#body(m, rec, opSignal));
      }, true);
    } catch (err) {
      // An operator's operation holds the node: never fight it; look again later.
      if (err instanceof BusyError) return;
      // Nothing started (its record could not be written, or agentd is shutting down).
      if (this.#status.state === 'repairing') this.#assign(before);
      if (err instanceof DrainingError) return;
      throw err;
    }
    if (op.state === 'succeeded') {
      this.#o.logger.info({ machine: m, operation: op.id }, 'repaired the node');
      await this.#set({ ...this.#fresh(), lastOperation: op.id });
      return;
    }
    const delay = this.#backoff.next();
    const failures = this.#backoff.failures;
    const lastError = op.error ? `${op.error.code}: ${op.error.message}` : `repair ${op.state}`;
    if (failures >= this.#policy.maxAttempts) {
      this.#o.logger.error(
        { machine: m, operation: op.id, failures, lastError },
        'giving up repairing the node after repeated failures',
      );
      this.#nextAttemptAt = 0;
      await this.#set({ state: 'gave_up', failures, nextAttemptAt: null, lastError, lastOperation: op.id });
      return;
    }
    this.#nextAttemptAt = this.#o.clock.now() + delay;
    this.#o.logger.warn(
      { machine: m, operation: op.id, failures, retryInMs: delay, lastError },
      'repair failed',
    );
    await this.#set({
      state: 'backoff',
      failures,
      nextAttemptAt: new Date(this.#nextAttemptAt).toISOString(),
      lastError,
      lastOperation: op.id,
    });
  }

  async #body(
    m: MachineName,
    rec: Parameters<Parameters<OperationSlot['launch']>[1]>[0],
    signal: AbortSignal,
  ): Promise<UpdateOutcome> {
    const { machines } = this.#o;
    const result: Record<string, unknown> = { machine: m };
    await rec.start();
    let phase: (typeof REPAIR_PHASES)[number] = 'start';
    try {
      await rec.phaseStarted('start');
      try {
        failpoint('repair.start.before');
        const info = await machines.inspect(m, signal);
        result.found = { running: info.running, kubelet: info.kubelet };
        if (!info.running) await machines.start(m, signal);
        await machines.startServices(m, signal);
      } catch (err) {
        throw err instanceof CancelledError ? err : new MachineStartFailedError(m, err);
      }
      await rec.phaseEnded('start', 'succeeded');
      phase = 'verify';
      await rec.phaseStarted('verify');
      await machines.verify(m, { timeoutMs: this.#o.verifyTimeoutMs, signal });
      await rec.phaseEnded('verify', 'succeeded');
      return { state: 'succeeded', result };
    } catch (err) {
      await rec.phaseEnded(phase, signal.aborted ? 'cancelled' : 'failed', err);
      rec.skipPending();
      if (signal.aborted) return { state: 'cancelled', result, error: new CancelledError(`repair ${m}`) };
      if (this.#o.diagnostics && isAgentError(err)) err.data.diagnostics = await this.#o.diagnostics(m);
      return { state: 'failed', result, error: err };
    }
  }
}
