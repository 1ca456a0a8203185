/**
 * The update engine: the one owner of the node's state. RPC methods call it; it runs one
 * mutating operation at a time, drives the host through the machine manager and the
 * provisioner, and records everything in the state dir (journal, history, node state).
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
import type { NodeStatus, Operation } from './operation.js';
import { NodeSnapshot } from './node-snapshot.js';
import { StatusVersion } from './status-version.js';
import { OperationSlot, type InFlight, type Launched } from './operation-slot.js';
import { buildDryRun } from './plan.js';
import { OperationStore } from './operation-store.js';
import type { PreflightCheck, Provisioner } from '../provision/provisioner-contract.js';
import { readJournal, writeJournal } from './journal.js';
import { NODE_NOT_READ_YET, recoveringReason } from './node-health.js';
import { recover, type RecoveryReport } from './recovery.js';
import { RESET_PHASES, runReset } from './reset.js';
import {
  DRAIN_PHASES,
  UNCORDON_PHASES,
  dryRunDrain,
  requireNodeOps,
  runDrain,
  runUncordon,
  type DrainRequest,
  type NodeDrainOps,
  type UncordonRequest,
} from './drain-ops.js';
import {
  UPDATE_PHASES,
  preflightFailureCode,
  runUpdate,
  type FleetGate,
  type NodeDrainer,
  type UpdateDeps,
} from './update.js';
import { NodeRepair, type RepairPolicy } from './repair.js';
import { DeferredWrites } from './deferred-writes.js';
import { StateReserve } from './reserve.js';
import { refuseOnDisagreement } from './state-check.js';

/** How long a dry run's preflight checks may take. */
const DRY_RUN_PREFLIGHT_MS = 60_000;
/** How old the node's facts in `status` may be, by default (`EngineOptions.statusMaxAgeMs`). */
export const STATUS_MAX_AGE_MS = 1000;
/**
 * How long `status` waits for a re-read of old node facts. A host that does not answer (systemd
 * wedged, a read running to its command timeouts) must not hang `status`: past this, the old facts
 * are answered, with a warning that says how old they are.
 */
export const STATUS_READ_WAIT_MS = 2000;

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
  /**
   * How old the node's facts in `status` may be (default STATUS_MAX_AGE_MS): an older snapshot is
   * read again before `status` answers.
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

export interface EngineStatus {
  node: NodeStatus;
  operation: Operation | null;
  lastOperation: Operation | null;
}

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

/** What `completePendingUncordon` did. */
export type PendingUncordonOutcome = 'none' | 'uncordoned' | 'unavailable' | 'failed';

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
  /** The interrupted operation whose cordon is still on the node (journal `uncordonPending`), or null. */
  #pendingUncordonId: string | null = null;
  #completingUncordon: Promise<PendingUncordonOutcome> | null = null;

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
        if (this.#pendingUncordon !== null && this.#o.drainer) void this.completePendingUncordon();
      },
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

  // Both are shown in `status` (as warnings): every change bumps the version.
  get #lastRecovery(): RecoveryReport | null {
    return this.#recovery;
  }

  set #lastRecovery(report: RecoveryReport | null) {
    this.#recovery = report;
    this.#version.bump();
  }

  get #pendingUncordon(): string | null {
    return this.#pendingUncordonId;
  }

  set #pendingUncordon(id: string | null) {
    this.#pendingUncordonId = id;
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
      diagnostics: o.diagnostics ?? null,
      healthGate: o.healthGate ?? null,
      // A new journal carries a pending uncordon on, so a crash during it does not lose it.
      uncordonPending: this.#pendingUncordon !== null,
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
    const interrupted = await this.#interruptedOperation();
    if (interrupted !== null) {
      this.#unknownBecause = recoveringReason(interrupted);
      this.#snap.explainUnknown(this.#unknownBecause);
      this.#o.onRecovering?.(interrupted);
    }
    this.#lastRecovery = await recover({ ...this.#deps, store: this.#store, logger: this.#o.logger });
    this.#unknownBecause = null;
    const journal = await readJournal(this.#o.stateDir);
    this.#pendingUncordon = journal?.closed && journal.uncordonPending ? journal.operationId : null;
    await this.refreshNode();
    return this.#lastRecovery;
  }

  /** The operation a restart interrupted, which startup recovery completes: the open journal's, else a record still running. */
  async #interruptedOperation(): Promise<{ id: string; kind: string } | null> {
    const journal = await readJournal(this.#o.stateDir);
    if (journal && !journal.closed) return { id: journal.operationId, kind: journal.kind };
    const running = this.#store.list().find((op) => op.state === 'running' || op.state === 'pending');
    return running ? { id: running.id, kind: running.kind } : null;
  }

  /** The interrupted operation whose cordon agentd still has to take back, or null. */
  get pendingUncordon(): string | null {
    return this.#pendingUncordon;
  }

  /**
   * Finish an uncordon that startup recovery had to leave pending (docs/architecture.md): the daemon calls
   * it once ready, and the engine after every operation. Uncordons when the Kubernetes API is
   * available and clears the journal's flag; otherwise logs that the node is still cordoned and
   * keeps the flag. Never throws.
   */
  completePendingUncordon(): Promise<PendingUncordonOutcome> {
    this.#completingUncordon ??= this.#completePendingUncordon().finally(() => {
      this.#completingUncordon = null;
    });
    return this.#completingUncordon;
  }

  async #completePendingUncordon(): Promise<PendingUncordonOutcome> {
    const id = this.#pendingUncordon;
    if (id === null) return 'none';
    const log = this.#o.logger.child({ interruptedOperation: id });
    try {
      const drainer = this.#o.drainer ?? null;
      if (!drainer) {
        const reason = this.#o.nodeOps?.unavailableReason() ?? 'agentd runs without Kubernetes wiring';
        log.warn(
          { reason },
          `the node is still cordoned by interrupted operation ${id} and the Kubernetes API is not available; once it is, run agentctl uncordon`,
        );
        return 'unavailable';
      }
      // Under the slot, so that no update's cordon or drain interleaves with this uncordon.
      const done = await this.#slot.exclusive(async () => {
        // An operator's `uncordon` may have done it meanwhile.
        if (this.#pendingUncordon !== id) return false;
        await drainer.uncordon();
        await this.#clearPendingUncordon();
        return true;
      });
      if (!done) return 'none';
      log.info(`uncordoned the node: interrupted operation ${id} had cordoned it`);
      await this.refreshNode().catch(() => undefined);
      return 'uncordoned';
    } catch (err) {
      log.warn(
        { err: describeError(err) },
        `the node is still cordoned by interrupted operation ${id}: the uncordon failed; agentd retries after the next operation, or run agentctl uncordon`,
      );
      return 'failed';
    }
  }

  /**
   * The pending uncordon is done: clear the flag in the journal (atomically). Only while no
   * operation writes the journal: under `exclusive`, or from the `uncordon` operation itself.
   */
  async #clearPendingUncordon(): Promise<void> {
    if (this.#pendingUncordon === null) return;
    const journal = await readJournal(this.#o.stateDir);
    if (journal?.closed && journal.uncordonPending) {
      await writeJournal(this.#o.stateDir, {
        ...journal,
        uncordonPending: false,
        updatedAt: new Date(this.#o.clock.now()).toISOString(),
      });
    }
    this.#pendingUncordon = null;
  }

  get lastRecovery(): RecoveryReport | null {
    return this.#lastRecovery;
  }

  /**
   * Status as the `status` method reports it. The node's facts are at most `statusMaxAgeMs` old
   * (`node.observedAt` says when they were read): an older snapshot is read again first and every
   * caller meanwhile waits for that one read, up to STATUS_READ_WAIT_MS; past that, the answer
   * carries the old facts and a warning. While an operation runs the node is not read (the
   * operation is changing it, and its end reads it again before it is reported ended).
   */
  async status(): Promise<EngineStatus> {
    // Owed writes and the reserve are caught up in the background — `status` never waits on a
    // disk — and under the slot, so that an owed journal never lands over a new operation's.
    if ((this.#deferred.size > 0 || !this.#reserve.whole) && this.#backgroundCatchUp === null) {
      this.#backgroundCatchUp = this.#slot
        .exclusive(() => this.#catchUp())
        .catch(() => undefined)
        .finally(() => (this.#backgroundCatchUp = null));
    }
    const slow = !(await this.freshen());
    const last = this.#store.list({ limit: 2 }).find((op) => op.id !== this.#slot.current?.id) ?? null;
    // The cordon comes from the Kubernetes session: agentd's own cordons and its watch of the Node.
    const cordoned = this.#o.nodeOps?.cordoned() ?? this.#snap.node.cordoned;
    const warnings = [...this.#snap.node.warnings, ...this.#engineWarnings()];
    const cordonWarning = this.#o.nodeOps?.cordonWarning?.() ?? null;
    if (cordonWarning !== null) warnings.push(cordonWarning);
    if (slow) {
      const from = this.#snap.node.observedAt;
      warnings.push(
        `the node's facts are from ${from ?? 'before the first read'}: a read of the node has not finished in ${STATUS_READ_WAIT_MS / 1000} s`,
      );
    }
    const repair = this.#repair.status();
    return {
      node: { ...this.#snap.node, cordoned, warnings, repair: { ...repair } },
      operation: this.#slot.current,
      lastOperation: last,
    };
  }

  /** Warnings of the engine's own (startup recovery, a pending uncordon), after the snapshot's. */
  #engineWarnings(): string[] {
    const warnings: string[] = this.#deferred.warnings();
    if (!this.#reserve.whole) {
      const r = this.#reserve.state;
      warnings.push(
        `agentd's reserve for rollback and recovery is not whole (${Math.floor(r.bytes / 1024)} KiB of space in ${this.#reserve.file}, ${r.descriptors} descriptors): free space or descriptors on the host`,
      );
    }
    const recovery = this.#lastRecovery;
    if (recovery && !recovery.ok) warnings.push(`startup recovery: ${recovery.outcome}`);
    const pending = this.#pendingUncordon;
    if (pending !== null) {
      warnings.push(`the node is still cordoned by interrupted operation ${pending}: run agentctl uncordon`);
    }
    warnings.push(...(this.#o.provisioner.hostWarnings?.() ?? []));
    const repair = this.#repair.status();
    if (repair.state === 'gave_up') {
      warnings.push(
        `agentd gave up repairing the node after ${repair.failures} failed attempts (${repair.lastError ?? 'unknown error'}): fix the cause, then agentctl update --force, or restart agentd to try again`,
      );
    } else if (repair.state === 'backoff') {
      warnings.push(
        `repair failed ${repair.failures} time(s) (${repair.lastError ?? 'unknown error'}); next attempt at ${repair.nextAttemptAt ?? '-'}`,
      );
    }
    return warnings;
  }

  /**
   * Read the node again when its facts are older than `statusMaxAgeMs` (see `status`; /metrics
   * calls it before a scrape). False when that read has not ended within STATUS_READ_WAIT_MS.
   */
  async freshen(): Promise<boolean> {
    const read = this.#readIfOld();
    return read === null || (await read);
  }

  /**
   * The re-read of an old snapshot that `status` waits for: it resolves true when the read ended
   * within STATUS_READ_WAIT_MS, false when it did not (it goes on; its end bumps the status
   * version). Null when the snapshot is not old, when an operation runs, and before the first
   * read (startup recovery is still deciding what the node is).
   */
  #readIfOld(): Promise<boolean> | null {
    if (this.#slot.current) return null;
    if (this.#oldRead !== null) return this.#oldRead;
    if (this.#o.clock.now() - this.#readAt < this.#maxAgeMs) return null;
    const read = this.refreshNode().catch(() => undefined);
    const wait = new AbortController();
    const inTime = Promise.race([
      read.then(() => true),
      this.#o.clock.sleep(STATUS_READ_WAIT_MS, wait.signal).then(
        () => false,
        () => true,
      ),
    ]);
    this.#oldRead = inTime;
    void read.finally(() => {
      wait.abort();
      this.#oldRead = null;
    });
    return inTime;
  }

  /** The re-read that `status` callers wait for, while it runs (see `#readIfOld`). */
  #oldRead: Promise<boolean> | null = null;

  /** When the node was last read, on the injected clock (Infinity: not yet). */
  #readAt = Infinity;

  get #maxAgeMs(): number {
    return this.#o.statusMaxAgeMs ?? STATUS_MAX_AGE_MS;
  }

  /** A read of the node is done: the snapshot is new, and gets old `statusMaxAgeMs` from now. */
  #noteRead(): void {
    this.#readAt = this.#o.clock.now();
    // An old snapshot is an input too: the version moves on then, so the next `status` is
    // answered afresh and refreshes it.
    this.#version.expireAfter(this.#maxAgeMs, this.#o.clock);
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
    // Trust the host over the files: an update acts on the machine node.json names. That check
    // reads the files and the host again, as the node's read does: both are reads only, so they
    // run together (each a wait on the disk and the host's tools), and its answer is taken below,
    // where it always was (an answer before it, a refusal or a no-op, still comes first).
    const agreement = req.dryRun ? null : refuseOnDisagreement(this.#deps, this.#applied);
    agreement?.catch(() => undefined);
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
    if (source === null && snap.node.warnings.some((w) => w.includes('no journal says which is active'))) {
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
      const checks = changed
        ? await this.#o.provisioner.preflight(goal, AbortSignal.timeout(DRY_RUN_PREFLIGHT_MS))
        : [];
      const op = this.#slot.create(
        'update',
        req,
        source,
        changed ? target : source,
        changed ? UPDATE_PHASES : [],
      );
      const plan = buildDryRun(op, {
        source,
        target,
        goal,
        changes,
        changed,
        drain: Boolean(req.drain),
        fleet: Boolean(this.#o.fleet) && !req.ignoreFleet,
        healthGate: (this.#o.healthGate?.prepare() ?? null) !== null,
        now: new Date(this.#o.clock.now()).toISOString(),
        paths: this.#o.paths,
        provisioner: this.#o.provisioner,
      });
      if (changed) (plan.result ??= {}).preflight = checks;
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
    if (!changed) return this.#recordNoop(req, source);
    await agreement;
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

  async reset(req: { wait?: boolean; reason?: string; requestedBy: string }): Promise<Operation> {
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
    if (req.dryRun) {
      const op = this.#slot.create('drain', req, active, active, []);
      const started = new Date(this.#o.clock.now()).toISOString();
      op.result = await dryRunDrain(ops, req);
      Object.assign(op, {
        state: 'succeeded',
        startedAt: started,
        finishedAt: new Date(this.#o.clock.now()).toISOString(),
      });
      return op;
    }
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
          if (out.state === 'succeeded' && this.#pendingUncordon !== null) {
            await this.#clearPendingUncordon().catch((err: unknown) =>
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

  /** Re-read the node from disk and the host. Concurrent callers share one refresh. */
  refreshNode(): Promise<void> {
    return this.#snap.refresh().finally(() => this.#noteRead());
  }
}

async function onDisk(dir: string): Promise<boolean> {
  try {
    await stat(dir);
    return true;
  } catch {
    return false;
  }
}
