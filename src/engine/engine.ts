/**
 * The update engine: the one owner of the node's state. It implements the ports the RPC methods
 * are given (src/rpc/ports.ts: the status reader, the operations port, the drain port); it runs
 * one mutating operation at a time, drives the host through the machine manager and the
 * provisioner, and records everything in the state dir (journal, history, node state). Its
 * parts live beside it: what `status` shows and how fresh (status-reader.ts), the uncordon an
 * interrupted operation left (pending-uncordon.ts), dry runs (dry-run.ts), the procedures
 * (update.ts, reset.ts, drain-ops.ts), recovery and repair.
 */
import { stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import { PreconditionFailedError, describeError, isAgentError } from '../errors.js';
import type { MachineManager } from '../host/machines.js';
import type { HostPaths } from '../host/paths.js';
import { alternateMachine, type Clock, type MachineName } from '../host/types.js';
import type { Metrics } from '../metrics/metrics.js';
import { redactAgentConfig, type AgentConfig } from '../config/agent-config.js';
import { createAppliedConfigStore, type AppliedConfigStore } from './applied-config-store.js';
import type { EngineEvent, EventBus } from './events.js';
import { diffConfigs, resolveGoal, type GoalSet } from './goal.js';
import type { Operation } from './operation.js';
import { NodeSnapshot } from './node-snapshot.js';
import { StatusVersion } from './status-version.js';
import { OperationSlot, type InFlight, type Launched } from './operation-slot.js';
import { planDrain, planUpdate } from './dry-run.js';
import { OperationStore } from './operation-store.js';
import type { PreflightCheck, Provisioner } from '../provision/provisioner-contract.js';
import type { Journal } from './journal.js';
import { NODE_NOT_READ_YET, recoveringReason } from './node-health.js';
import { readJournalOn, recover, recoveryWarnings, type RecoveryReport } from './recovery.js';
import { RESET_PHASES, runReset } from './reset.js';
import {
  DRAIN_PHASES,
  UNCORDON_PHASES,
  requireNodeOps,
  runDrain,
  runUncordon,
  type DrainRequest,
  type NodeDrainOps,
  type UncordonRequest,
} from './drain-ops.js';
import {
  UPDATE_PHASES,
  runUpdate,
  type FleetGate,
  type NodeDrainer,
  type UpdateDeps,
  type UpdateRequest,
} from './update.js';
import { NodeRepair, type RepairPolicy } from './repair.js';
import { DeferredWrites } from './deferred-writes.js';
import { StateReserve } from './reserve.js';
import { checkStateFiles, observeHost } from './host-truth.js';
import { stateConflictError } from './state-check.js';
import { PendingUncordon, type PendingUncordonOutcome } from './pending-uncordon.js';
import { StatusReader, type EngineStatus } from './status-reader.js';
import type { StatusWarning } from './warnings.js';

export type { EngineStatus, PendingUncordonOutcome, UpdateRequest };

export interface EngineOptions {
  paths: HostPaths;
  stateDir: string;
  machines: MachineManager;
  provisioner: Provisioner;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  events: EventBus;
  drainer?: NodeDrainer | null;
  /** The fleet gate of the update's `slot` phase (docs/fleet.md); null or absent: skipped. */
  fleet?: FleetGate | null;
  /** This node's cordon/drain/uncordon for the `drain` and `uncordon` operations. */
  nodeOps?: NodeDrainOps | null;
  /** The base config on a node that has not joined (`--sim` generates one), or null. */
  defaultConfig?: () => AgentConfig | null;
  appliedStore?: AppliedConfigStore;
  verifyTimeoutMs?: number;
  /** How an update switches machines (default `cold`; the daemon passes `--switch-order`). */
  switchOrder?: UpdateDeps['switchOrder'];
  /** The host's available memory (the standby check). */
  memAvailable?: UpdateDeps['memAvailable'];
  /**
   * How old the node's facts in `status` may be (default STATUS_MAX_AGE_MS, status-reader.ts):
   * an older snapshot is read again before `status` answers.
   */
  statusMaxAgeMs?: number;
  historyLimit?: number;
  /**
   * Descriptors held back for a rollback or recovery (src/engine/reserve.ts). The daemon holds
   * RESERVE_DESCRIPTORS and closes them at its end; default none, so that an engine nobody
   * closes (tests) leaves no open FileHandle for the garbage collector, which Node 26 refuses.
   */
  reserveDescriptors?: number;
  /** The version of what `status` shows; the engine bumps it for its own inputs (default: its own). */
  statusVersion?: StatusVersion;
  /** Capture what explains a failed machine before it is removed (journals, unit status). */
  diagnostics?: UpdateDeps['diagnostics'];
  /** The health gate after `verify` (docs/fleet.md, "The health gate"); absent or null: no gate. */
  healthGate?: UpdateDeps['healthGate'];
  /** Repair between requests (docs/operations.md); off unless enabled. */
  repair?: { enabled: boolean; policy?: Partial<RepairPolicy> };
  /** Called at start when a restart interrupted an operation, before recovery completes it. */
  onRecovering?: (operation: { id: string; kind: string }) => void;
}

/** A `reset` as the RPC method passes it. */
export interface ResetRequest {
  wait?: boolean;
  reason?: string;
  requestedBy: string;
}

export class Engine {
  readonly #o: EngineOptions;
  readonly #applied: AppliedConfigStore;
  readonly #store: OperationStore;
  /** Writes owed after the disk filled or the descriptors ran out (docs/operations.md). */
  readonly #deferred: DeferredWrites;
  /** Space and descriptors held back for rollback and recovery. */
  readonly #reserve: StateReserve;
  readonly #snap: NodeSnapshot;
  readonly #slot: OperationSlot;
  readonly #version: StatusVersion;
  #recovery: RecoveryReport | null = null;
  readonly #repair: NodeRepair;
  #repairStop: AbortController | null = null;
  #repairLoop: Promise<void> | null = null;
  /** Until startup recovery has run, the node's state is not known: why (null once it is). */
  #unknownBecause: string | null = NODE_NOT_READ_YET;
  /** The cordon an interrupted operation left on the node. */
  readonly #pending: PendingUncordon;
  /** What `status` shows, and how fresh. */
  readonly #reader: StatusReader;

  constructor(options: EngineOptions) {
    this.#o = options;
    this.#version = options.statusVersion ?? new StatusVersion();
    // Every operation event (start, phase, end) changes what `status` shows.
    options.events.subscribe(this.#version.bump);
    this.#applied = options.appliedStore ?? createAppliedConfigStore(options.paths, options.logger);
    this.#deferred = new DeferredWrites({
      logger: options.logger,
      now: () => new Date(options.clock.now()).toISOString(),
    });
    this.#reserve = new StateReserve(options.stateDir, {
      logger: options.logger,
      descriptors: options.reserveDescriptors ?? 0,
    });
    this.#store = new OperationStore(options.stateDir, {
      limit: options.historyLimit,
      logger: options.logger,
      deferred: this.#deferred,
    });
    this.#snap = new NodeSnapshot({
      paths: options.paths,
      stateDir: options.stateDir,
      machines: options.machines,
      applied: this.#applied,
      metrics: options.metrics,
      onChange: this.#version.bump,
      unknownBecause: () => this.#unknownBecause,
      now: () => options.clock.now(),
    });
    this.#slot = new OperationSlot({
      store: this.#store,
      events: options.events,
      metrics: options.metrics,
      logger: options.logger,
      clock: options.clock,
      onChange: this.#version.bump,
      // Read-your-writes: the node is re-read before the end of an operation is recorded, so a
      // client told that it ended (its wait, its event stream) sees its effect in `status`.
      beforeFinish: () => this.refreshNode(),
      afterOperation: () => {
        // An uncordon left pending by an interrupted operation is retried after every operation
        // (not awaited: it waits for the slot to be free), when Kubernetes is available.
        if (this.#pending.id !== null && this.#o.drainer) void this.completePendingUncordon();
      },
    });
    this.#pending = new PendingUncordon({
      stateDir: options.stateDir,
      clock: options.clock,
      logger: options.logger,
      drainer: () => this.#o.drainer ?? null,
      unavailableReason: () =>
        this.#o.nodeOps?.unavailableReason() ?? 'agentd runs without Kubernetes wiring',
      exclusive: (fn) => this.#slot.exclusive(fn),
      refresh: () => this.refreshNode(),
      onChange: this.#version.bump,
    });
    this.#repair = new NodeRepair({
      enabled: options.repair?.enabled ?? false,
      policy: options.repair?.policy,
      slot: this.#slot,
      machines: options.machines,
      clock: options.clock,
      logger: options.logger.child({ subsystem: 'repair' }),
      verifyTimeoutMs: options.verifyTimeoutMs,
      diagnostics: options.diagnostics ?? null,
      refresh: () => this.refreshNode(),
      onChange: this.#version.bump,
      node: () => ({ node: this.#snap.node, configured: this.#snap.activeRecord !== null }),
      lastOperation: () => this.#store.list({ limit: 1 })[0] ?? null,
    });
    this.#reader = new StatusReader({
      snapshot: this.#snap,
      clock: options.clock,
      version: this.#version,
      maxAgeMs: options.statusMaxAgeMs,
      running: () => this.#slot.current,
      history: (limit) => this.#store.list({ limit }),
      beforeStatus: () => this.#upkeep(),
      // The cordon comes from the Kubernetes session: agentd's own cordons and its watch of the Node.
      cordoned: () => this.#o.nodeOps?.cordoned() ?? this.#snap.node.cordoned,
      repair: () => this.#repair.status(),
      warnings: () => this.#warnings(),
    });
  }

  /** Start keeping the node at its desired state (no-op with repair off); once ready. */
  startRepair(): void {
    if (this.#repairLoop) return;
    this.#repairStop = new AbortController();
    this.#repairLoop = this.#repair.run(this.#repairStop.signal);
  }

  /** One repair check now (tests; the loop runs the same). */
  checkRepair(): Promise<void> {
    return this.#repair.check();
  }

  /** The version of what `status` shows (see `StatusVersion`). */
  get statusVersion(): StatusVersion {
    return this.#version;
  }

  // Shown in `status` (as warnings): every change bumps the version.
  get #lastRecovery(): RecoveryReport | null {
    return this.#recovery;
  }

  set #lastRecovery(report: RecoveryReport | null) {
    this.#recovery = report;
    this.#version.bump();
  }

  get #deps() {
    const o = this.#o;
    return {
      stateDir: o.stateDir,
      machines: o.machines,
      provisioner: o.provisioner,
      applied: this.#applied,
      clock: o.clock,
      metrics: o.metrics,
      drainer: o.drainer ?? null,
      fleet: o.fleet ?? null,
      verifyTimeoutMs: o.verifyTimeoutMs,
      switchOrder: o.switchOrder,
      memAvailable: o.memAvailable,
      diagnostics: o.diagnostics ?? null,
      healthGate: o.healthGate ?? null,
      // A new journal carries a pending uncordon on, so a crash during it does not lose it.
      uncordonPending: this.#pending.id !== null,
      reserve: this.#reserve,
      deferred: this.#deferred,
      onDisk: (m: MachineName) => onDisk(o.paths.machineDir(m)),
    };
  }

  /**
   * Write what is owed and take the reserve back. Only while no operation runs and none is
   * being admitted (under `exclusive`, or inside the admission itself): an owed journal write
   * must not replace the journal of an operation that runs. Never throws.
   */
  async #catchUp(): Promise<void> {
    if (this.#slot.current) return;
    if (this.#deferred.size > 0) await this.#deferred.flush();
    if (!this.#reserve.whole) await this.#reserve.ensure();
  }

  /** The catch-up `status` started, while it runs. */
  #backgroundCatchUp: Promise<void> | null = null;

  /** The space and descriptor reserve as it is (tests, status). */
  get reserve(): StateReserve {
    return this.#reserve;
  }

  /**
   * Load history, run startup recovery, and read the node. Called once, before ready. Only when
   * a restart interrupted an operation (an open journal, or a record still running) does agentd
   * say that it recovers the node (`onRecovering`, the reason `status` gives).
   */
  async start(): Promise<RecoveryReport | null> {
    // The reserve first: recovery may need it.
    await this.#reserve.ensure();
    await this.#store.load();
    // Read once, on the reserve: what recovery writes is handed on, never read back.
    const journal = await readJournalOn({ stateDir: this.#o.stateDir, reserve: this.#reserve });
    const interrupted = this.#interruptedOperation(journal);
    if (interrupted !== null) {
      this.#unknownBecause = recoveringReason(interrupted);
      this.#snap.explainUnknown(this.#unknownBecause);
      this.#o.onRecovering?.(interrupted);
    }
    const recovered = await recover({ ...this.#deps, store: this.#store, logger: this.#o.logger }, journal);
    this.#lastRecovery = recovered.report;
    this.#unknownBecause = null;
    this.#pending.load(recovered.journal);
    await this.refreshNode();
    return this.#lastRecovery;
  }

  /** The operation a restart interrupted, which startup recovery completes: the open journal's, else a record still running. */
  #interruptedOperation(journal: Journal | null): { id: string; kind: string } | null {
    if (journal && !journal.closed) return { id: journal.operationId, kind: journal.kind };
    const running = this.#store.list().find((op) => op.state === 'running' || op.state === 'pending');
    return running ? { id: running.id, kind: running.kind } : null;
  }

  /** The interrupted operation whose cordon agentd still has to take back, or null. */
  get pendingUncordon(): string | null {
    return this.#pending.id;
  }

  /**
   * Finish an uncordon that startup recovery had to leave pending (pending-uncordon.ts): the
   * daemon calls it once ready, and the engine after every operation. Never throws.
   */
  completePendingUncordon(): Promise<PendingUncordonOutcome> {
    return this.#pending.complete();
  }

  get lastRecovery(): RecoveryReport | null {
    return this.#lastRecovery;
  }

  /** Status as the `status` method reports it (status-reader.ts: freshness, warnings). */
  status(): Promise<EngineStatus> {
    return this.#reader.status();
  }

  /**
   * Read the node again when its facts are older than `statusMaxAgeMs` (/metrics calls it before
   * a scrape). False when that read has not ended in time (see `StatusReader.freshen`).
   */
  freshen(): Promise<boolean> {
    return this.#reader.freshen();
  }

  /**
   * Owed writes and the reserve are caught up in the background, at every `status` — `status`
   * never waits on a disk — and under the slot, so that an owed journal never lands over a new
   * operation's.
   */
  #upkeep(): void {
    if ((this.#deferred.size > 0 || !this.#reserve.whole) && this.#backgroundCatchUp === null) {
      this.#backgroundCatchUp = this.#slot
        .exclusive(() => this.#catchUp())
        .catch(() => undefined)
        .finally(() => (this.#backgroundCatchUp = null));
    }
  }

  /** The warnings of the engine's own parts, each made by its source, after the snapshot's. */
  #warnings(): StatusWarning[] {
    const warnings: StatusWarning[] = [
      ...this.#deferred.warnings(),
      ...optional(this.#reserve.warning()),
      ...recoveryWarnings(this.#lastRecovery),
      ...optional(this.#pending.warning()),
      ...(this.#o.provisioner.hostWarnings?.() ?? []).map((message): StatusWarning => ({
        code: 'host',
        message,
      })),
      ...optional(this.#repair.warning()),
    ];
    const cordon = this.#o.nodeOps?.cordonWarning?.() ?? null;
    if (cordon !== null) warnings.push({ code: 'cordon-unwatched', message: cordon });
    return warnings;
  }

  /**
   * The active machine's applied config as last read, UNREDACTED: for agentd's own
   * use (Kubernetes credentials, self-registration). Never return it over RPC.
   */
  activeAppliedConfig(): AgentConfig | null {
    return this.#snap.activeRecord?.config ?? null;
  }

  /** The machine `activeAppliedConfig` is of, or null. */
  activeAppliedMachine(): MachineName | null {
    return this.#snap.activeRecord?.machine ?? null;
  }

  /** The active machine's applied config with secrets redacted, or null on a node not joined yet. */
  async appliedConfig(): Promise<{
    machine: MachineName;
    config: AgentConfig;
    hash: string;
    verified: boolean;
  } | null> {
    await this.refreshNode();
    const rec = this.#snap.activeRecord;
    if (!rec) {
      // A joined node whose applied config cannot be read answers why, not "not joined".
      const active = this.#snap.node.activeMachine;
      const unreadable = active ? this.#snap.unreadable.get(active) : [...this.#snap.unreadable.values()][0];
      if (unreadable !== undefined) throw unreadable;
      return null;
    }
    return {
      machine: rec.machine,
      config: redactAgentConfig(rec.config),
      hash: rec.hash,
      verified: rec.verified,
    };
  }

  // ---- operations -------------------------------------------------------------------------

  getOperation(id: string): Operation {
    return this.#slot.get(id);
  }

  listOperations(filter: { limit?: number; state?: string }): Operation[] {
    return this.#store.list(filter);
  }

  /** The operation once it ends, or as it is when `timeoutMs` passes. */
  waitOperation(id: string, timeoutMs: number | undefined): Promise<Operation> {
    return this.#slot.wait(id, timeoutMs);
  }

  /** Cancel a running operation before its point of no return; it then undoes what it did. */
  cancelOperation(id: string): Operation {
    return this.#slot.cancel(id);
  }

  async update(req: UpdateRequest): Promise<Operation> {
    // A dry run changes nothing: it takes no admission and is never BUSY.
    if (req.dryRun) return (await this.#admitUpdate(req)) as Operation;
    const replay = (): Operation | Promise<Operation> | undefined => {
      const seen = req.idempotencyKey ? this.#slot.findIdempotent(req.idempotencyKey) : undefined;
      if (!seen) return undefined;
      return req.wait ? this.#slot.wait(seen.id, undefined) : seen;
    };
    return this.#slot.admit(() => this.#admitUpdate(req), req.wait, replay);
  }

  async #admitUpdate(req: UpdateRequest): Promise<Operation | Launched> {
    if (!req.dryRun) await this.#catchUp();
    // A read of the node that starts now: the files, the host (on the reserve when descriptors
    // are out), and whether they agree. Trust the host over the files: an update acts on the
    // machine node.json names, so it is refused below while a file disagrees (an answer before
    // that, a refusal or a no-op, still comes first).
    await this.refreshNode();
    if (req.idempotencyKey && !req.dryRun) {
      const seen = this.#slot.findIdempotent(req.idempotencyKey);
      if (seen) return seen;
    }
    const snap = this.#snap;
    const source = snap.node.activeMachine;
    const unreadable = source ? snap.unreadable.get(source) : [...snap.unreadable.values()][0];
    if (unreadable !== undefined) {
      // Never treat a node whose applied config is damaged as fresh: that would provision
      // over the machine that serves.
      throw new PreconditionFailedError(
        `the applied config of the node cannot be read (${isAgentError(unreadable) ? `${unreadable.code}: ` : ''}${describeError(unreadable)}); restore it, or run reset`,
        { cause: unreadable, data: { machine: source ?? [...snap.unreadable.keys()][0] } },
      );
    }
    if (source === null && snap.node.warnings.some((w) => w.code === 'active-machine-unknown')) {
      throw new PreconditionFailedError(
        'the node has applied configs but no active machine (see status warnings); run reset, or recover the node by hand',
      );
    }
    const applied = snap.activeRecord?.config ?? null;
    const goal = resolveGoal(
      { config: req.config, set: req.set },
      applied,
      this.#o.defaultConfig?.() ?? null,
    );
    const changes = diffConfigs(applied, goal);
    if (req.drain && !this.#o.drainer) {
      throw new PreconditionFailedError(
        'drain needs Kubernetes credentials (--kubeconfig or an applied config with a bootstrap token)',
      );
    }
    const target = source ? alternateMachine(source) : 'kube1';
    const changed = changes.length > 0 || Boolean(req.force);
    if (req.dryRun) {
      // A dry run checks what the update's preflight would (reachability, no download) when
      // something would change, so a target that cannot be fetched is seen now, not later.
      return planUpdate(
        { paths: this.#o.paths, provisioner: this.#o.provisioner, clock: this.#o.clock },
        {
          source,
          target,
          goal,
          changes,
          changed,
          drain: Boolean(req.drain),
          fleet: Boolean(this.#o.fleet) && !req.ignoreFleet,
          healthGate: (this.#o.healthGate?.prepare() ?? null) !== null,
          standby: this.#o.switchOrder === 'standby',
        },
        (to, phases) => this.#slot.create('update', req, source, to, phases),
      );
    }
    if (!changed) return this.#recordNoop(req, source);
    await this.#refuseOnDisagreement();
    const op = this.#slot.create('update', req, source, target, UPDATE_PHASES);
    op.result = { changes };
    return this.#slot.launch(op, (rec, signal, hooks) =>
      runUpdate(
        this.#deps,
        rec,
        { source, target, config: goal, drain: Boolean(req.drain), ignoreFleet: Boolean(req.ignoreFleet) },
        signal,
        hooks,
      ),
    );
  }

  async reset(req: ResetRequest): Promise<Operation> {
    return this.#slot.admit(async () => {
      await this.refreshNode();
      const source = this.#snap.node.activeMachine;
      const op = this.#slot.create('reset', req, source, null, RESET_PHASES);
      return this.#slot.launch(op, (rec) => runReset(this.#deps, rec, source), false);
    }, req.wait);
  }

  // drain and uncordon: operations under the same one-at-a-time lock as update.
  async drain(req: DrainRequest): Promise<Operation> {
    const ops = requireNodeOps(this.#o.nodeOps);
    const active = this.#snap.node.activeMachine;
    if (req.dryRun)
      return planDrain(ops, req, this.#slot.create('drain', req, active, active, []), this.#o.clock);
    return this.#slot.admit(async () => {
      const op = this.#slot.create('drain', req, active, active, DRAIN_PHASES);
      return this.#slot.launch(op, (rec, signal) => runDrain(ops, rec, req, signal));
    }, req.wait);
  }

  async uncordon(req: UncordonRequest): Promise<Operation> {
    const ops = requireNodeOps(this.#o.nodeOps);
    return this.#slot.admit(async () => {
      const active = this.#snap.node.activeMachine;
      const op = this.#slot.create('uncordon', req, active, active, UNCORDON_PHASES);
      return this.#slot.launch(
        op,
        async (rec) => {
          const out = await runUncordon(ops, rec, req);
          // The operator's uncordon also takes back a cordon an interrupted operation left.
          if (out.state === 'succeeded' && this.#pending.id !== null) {
            await this.#pending
              .clear()
              .catch((err: unknown) =>
                rec.logger.warn({ err: describeError(err) }, 'clearing the pending uncordon in the journal'),
              );
          }
          return out;
        },
        false,
      );
    }, req.wait);
  }

  /** Preflight checks of a config (default: what an update with no params would apply). No side effects. */
  async preflight(
    config: AgentConfig | undefined,
    signal: AbortSignal,
    set?: GoalSet,
  ): Promise<{ config: AgentConfig; checks: PreflightCheck[] }> {
    await this.refreshNode();
    const goal = resolveGoal(
      { config, set },
      this.#snap.activeRecord?.config ?? null,
      this.#o.defaultConfig?.() ?? null,
    );
    const checks = [
      { name: 'config', ok: true, message: 'the agent config is valid' },
      ...(await this.#o.provisioner.preflight(goal, signal)),
    ];
    return { config: redactAgentConfig(goal), checks };
  }

  /** Events a new follower of `/v1/events` gets first: the state of the operation it follows. */
  currentOperationEvents(filter: string | null): EngineEvent[] {
    return this.#slot.currentEvents(filter);
  }

  /**
   * Shutdown: see `OperationSlot.drain`; then let a node refresh under way finish. Resolves to
   * the work still in flight when the grace is over (then nothing more is waited for), or null.
   */
  async shutdown(graceMs: number): Promise<InFlight | null> {
    // No new repair starts; one under way is drained like any operation.
    this.#repairStop?.abort();
    const left = await this.#slot.drain(graceMs);
    if (left !== null) return left;
    await this.#repairLoop;
    await this.#snap.settled();
    return null;
  }

  async #recordNoop(req: UpdateRequest, source: MachineName | null): Promise<Operation> {
    const op = this.#slot.create('update', req, source, source, []);
    const rec = this.#slot.recorder(op);
    await rec.start();
    await rec.finish('succeeded', {
      changed: false,
      message: 'the applied config already matches the target; nothing to do (use force to re-provision)',
    });
    return op;
  }

  // ---- node snapshot ----------------------------------------------------------------------

  /**
   * Refuse an update (STATE_CONFLICT) while the state files, as the node's last read found them,
   * disagree with the host or with each other. A machine that read could not ask about (no
   * descriptor left) is asked again on the reserve, as before a destructive step; the reserve is
   * not spent on `status` reads.
   */
  async #refuseOnDisagreement(): Promise<void> {
    const checked = this.#snap.checked;
    if (checked === null) return;
    let { facts, disagreements } = checked;
    if (this.#snap.node.machines.some((m) => m.kubelet === 'unknown')) {
      facts = await observeHost(this.#o.machines, {
        reserve: this.#reserve,
        onDisk: (m) => onDisk(this.#o.paths.machineDir(m)),
      });
      disagreements = checkStateFiles(checked.claims, facts);
    }
    if (disagreements.length > 0) throw stateConflictError(disagreements, facts);
  }

  /** Re-read the node from disk and the host. Concurrent callers share one refresh. */
  refreshNode(): Promise<void> {
    return this.#reader.refresh();
  }
}

function optional<T>(value: T | null): T[] {
  return value === null ? [] : [value];
}

async function onDisk(dir: string): Promise<boolean> {
  try {
    await stat(dir);
    return true;
  } catch {
    return false;
  }
}
