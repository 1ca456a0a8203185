/**
 * The update engine: the one owner of the node's state. RPC methods call it; it runs one
 * mutating operation at a time, drives the host through the machine manager and the
 * provisioner, and records everything in the state dir (journal, history, node state).
 */
import { stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import {
  BusyError,
  CancelledError,
  NotFoundError,
  PreconditionFailedError,
  describeError,
  isAgentError,
} from '../errors.js';
import type { MachineManager } from '../host/machines.js';
import type { HostPaths } from '../host/paths.js';
import { MACHINE_NAMES, alternateMachine, type Clock, type MachineName } from '../host/types.js';
import type { Metrics } from '../metrics/metrics.js';
import { redactAgentConfig, serializeAgentConfig, type AgentConfig } from './agent-config.js';
import {
  createAppliedConfigStore,
  sha256Hex,
  type AppliedConfigRecord,
  type AppliedConfigStore,
} from './applied-config-store.js';
import type { EngineEvent, EventBus } from './events.js';
import { diffConfigs, resolveGoal, type GoalSet } from './goal.js';
import { readNodeState } from './node-state.js';
import {
  FINAL_STATES,
  type MachineStatus,
  type NodeStatus,
  type Operation,
  type OperationKind,
} from './operation.js';
import { OperationRecorder, toErrorInfo } from './operation-recorder.js';
import { OperationStore, newOperationId } from './operation-store.js';
import type { PreflightCheck, Provisioner } from './provisioner.js';
import { recover, type RecoveryReport } from './recovery.js';
import { RESET_PHASES, runReset } from './reset.js';
// [kube-wiring] drain/uncordon operations
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
import { UPDATE_PHASES, runUpdate, type NodeDrainer, type UpdateOutcome } from './update.js';

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
  /** [kube-wiring] This node's cordon/drain/uncordon for the `drain` and `uncordon` operations. */
  nodeOps?: NodeDrainOps | null;
  /** The base config on a node that has not joined (`--sim` generates one), or null. */
  defaultConfig?: () => AgentConfig | null;
  appliedStore?: AppliedConfigStore;
  verifyTimeoutMs?: number;
  /** How old the cached node snapshot may get before `status` refreshes it in the background. */
  statusMaxAgeMs?: number;
  historyLimit?: number;
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
  dryRun?: boolean;
  wait?: boolean;
  idempotencyKey?: string;
  reason?: string;
  requestedBy: string;
}

interface Running {
  rec: OperationRecorder;
  controller: AbortController;
  done: Promise<Operation>;
  /** False once the operation passed its point of no return (the source is stopping). */
  cancellable: boolean;
}

export class Engine {
  readonly #o: EngineOptions;
  readonly #applied: AppliedConfigStore;
  readonly #store: OperationStore;
  #node: NodeStatus = { activeMachine: null, applied: null, machines: [], cordoned: null, warnings: [] };
  #activeRecord: AppliedConfigRecord | null = null;
  #nodeAt = 0;
  /** Applied configs that exist but cannot be read (bad sidecar, bad JSON), by machine. */
  #unreadable = new Map<MachineName, unknown>();
  /** Bumped by every node refresh (see statusKey). */
  #nodeVersion = 0;
  #refreshing: Promise<void> | null = null;
  #running: Running | null = null;
  /** Taken synchronously while a request is being admitted, so two calls cannot both start. */
  #admittingFlag = false;
  /**
   * Resolves when the admission under way ends. A mutating call that arrives meanwhile waits
   * for it (`while (this.#admitting) await this.#admissionEnded`) rather than failing at once:
   * its BUSY then names the operation that admission started, not a placeholder, and when the
   * rival started nothing (invalid, no-op) it goes ahead.
   */
  #admissionEnded: Promise<void> = Promise.resolve();
  #endAdmission: () => void = () => undefined;
  #lastRecovery: RecoveryReport | null = null;

  constructor(options: EngineOptions) {
    this.#o = options;
    this.#applied = options.appliedStore ?? createAppliedConfigStore(options.paths, options.logger);
    this.#store = new OperationStore(options.stateDir, {
      limit: options.historyLimit,
      logger: options.logger,
    });
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
      verifyTimeoutMs: o.verifyTimeoutMs,
    };
  }

  /** Load history, run startup recovery, and read the node. Called once, before ready. */
  async start(): Promise<RecoveryReport | null> {
    await this.#store.load();
    this.#lastRecovery = await recover({ ...this.#deps, store: this.#store, logger: this.#o.logger });
    await this.refreshNode();
    return this.#lastRecovery;
  }

  get lastRecovery(): RecoveryReport | null {
    return this.#lastRecovery;
  }

  /** Status as the `status` method reports it; cheap (served from the cached snapshot). */
  status(): EngineStatus {
    this.#refreshIfStale();
    const last = this.#store.list({ limit: 2 }).find((op) => op.id !== this.#running?.rec.op.id) ?? null;
    // [kube-wiring] the cordon state comes from the last cordon/drain/uncordon agentd saw.
    const cordoned = this.#o.nodeOps?.cordoned() ?? this.#node.cordoned;
    const node = cordoned === this.#node.cordoned ? this.#node : { ...this.#node, cordoned };
    return { node, operation: this.#running ? this.#running.rec.op : null, lastOperation: last };
  }

  /**
   * A key that changes whenever `status()` would answer differently: the node snapshot, any
   * operation event, the cordon state. Lets the `status` method reuse its serialized answer.
   */
  statusKey(): string {
    this.#refreshIfStale();
    return `${this.#nodeVersion}|${this.#o.events.seq}|${String(this.#o.nodeOps?.cordoned() ?? this.#node.cordoned)}`;
  }

  #refreshIfStale(): void {
    const maxAge = this.#o.statusMaxAgeMs ?? 5000;
    if (!this.#running && this.#o.clock.now() - this.#nodeAt > maxAge) void this.refreshNode();
  }

  /**
   * [kube-wiring] The active machine's applied config as last read, UNREDACTED: for agentd's own
   * use (Kubernetes credentials, self-registration). Never return it over RPC.
   */
  activeAppliedConfig(): AgentConfig | null {
    return this.#activeRecord?.config ?? null;
  }

  /** The active machine's applied config with secrets redacted, or null on a node not joined yet. */
  async appliedConfig(): Promise<{
    machine: MachineName;
    config: AgentConfig;
    hash: string;
    verified: boolean;
  } | null> {
    await this.refreshNode();
    const rec = this.#activeRecord;
    if (!rec) {
      // A joined node whose applied config cannot be read answers why, not "not joined".
      const active = this.#node.activeMachine;
      const unreadable = active ? this.#unreadable.get(active) : [...this.#unreadable.values()][0];
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
    const op = this.#running?.rec.op.id === id ? this.#running.rec.op : this.#store.get(id);
    if (!op) throw new NotFoundError(`operation ${id}`);
    return op;
  }

  listOperations(filter: { limit?: number; state?: string }): Operation[] {
    return this.#store.list(filter);
  }

  /** The operation once it ends, or as it is when `timeoutMs` passes. */
  async waitOperation(id: string, timeoutMs: number | undefined): Promise<Operation> {
    const op = this.getOperation(id);
    const running = this.#running;
    if (FINAL_STATES.has(op.state) || !running || running.rec.op.id !== id) return op;
    if (timeoutMs === undefined) return running.done;
    // The timeout runs on the injected clock; it is aborted as soon as the operation ends.
    const stop = new AbortController();
    const timeout = this.#o.clock.sleep(timeoutMs, stop.signal).then(
      () => structuredClone(running.rec.op),
      () => running.done,
    );
    try {
      return await Promise.race([running.done, timeout]);
    } finally {
      stop.abort();
    }
  }

  /** Cancel a running operation before its point of no return; it then undoes what it did. */
  cancelOperation(id: string): Operation {
    const op = this.getOperation(id);
    const running = this.#running;
    if (FINAL_STATES.has(op.state) || !running || running.rec.op.id !== id) {
      throw new PreconditionFailedError(`operation ${id} already ended (${op.state})`, {
        data: { state: op.state },
      });
    }
    if (!running.cancellable) {
      throw new PreconditionFailedError(
        `operation ${id} is past its point of no return (the switch-over has begun); it can no longer be cancelled`,
        { data: { phase: op.phases.find((p) => p.state === 'running')?.name ?? null } },
      );
    }
    running.controller.abort(new CancelledError(`operation ${id}`));
    return op;
  }

  async update(req: UpdateRequest): Promise<Operation> {
    // Re-checked after every wake-up, and nothing awaits between the last check and taking the
    // admission below: see `#admissionEnded`.
    if (!req.dryRun) while (this.#admitting) await this.#admissionEnded;
    if (req.idempotencyKey) {
      const seen = this.#findIdempotent(req.idempotencyKey);
      if (seen) return req.wait ? this.waitOperation(seen.id, undefined) : seen;
    }
    if (!req.dryRun) {
      this.#assertIdle();
      this.#admitting = true;
    }
    try {
      await this.refreshNode();
      if (req.idempotencyKey) {
        const seen = this.#findIdempotent(req.idempotencyKey);
        if (seen) return seen;
      }
      const source = this.#node.activeMachine;
      const unreadable = source ? this.#unreadable.get(source) : [...this.#unreadable.values()][0];
      if (unreadable !== undefined) {
        // Never treat a node whose applied config is damaged as fresh: that would provision
        // over the machine that serves.
        throw new PreconditionFailedError(
          `the applied config of the node cannot be read (${isAgentError(unreadable) ? `${unreadable.code}: ` : ''}${describeError(unreadable)}); restore it, or run reset`,
          { cause: unreadable, data: { machine: source ?? [...this.#unreadable.keys()][0] } },
        );
      }
      if (source === null && this.#hasAmbiguousMachines()) {
        throw new PreconditionFailedError(
          'the node has applied configs but no active machine (see status warnings); run reset, or recover the node by hand',
        );
      }
      const applied = this.#activeRecord?.config ?? null;
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
      if (req.dryRun) return this.#dryRunOperation(req, source, target, goal, changes, changed);
      if (!changed) return this.#recordNoop(req, source);
      const op = this.#newOperation('update', req, source, target, UPDATE_PHASES);
      op.result = { changes };
      return await this.#launch(op, req.wait, (rec, signal, hooks) =>
        runUpdate(
          this.#deps,
          rec,
          { source, target, config: goal, drain: Boolean(req.drain) },
          signal,
          hooks,
        ),
      );
    } finally {
      // A dry run never took the admission: it must not release another request's.
      if (!req.dryRun) this.#admitting = false;
    }
  }

  async reset(req: { wait?: boolean; reason?: string; requestedBy: string }): Promise<Operation> {
    while (this.#admitting) await this.#admissionEnded;
    this.#assertIdle();
    this.#admitting = true;
    try {
      await this.refreshNode();
      const source = this.#node.activeMachine;
      const op = this.#newOperation('reset', req, source, null, RESET_PHASES);
      return await this.#launch(op, req.wait, (rec) => runReset(this.#deps, rec, source), false);
    } finally {
      this.#admitting = false;
    }
  }

  // [kube-wiring] drain and uncordon: operations under the same one-at-a-time lock as update.
  async drain(req: DrainRequest): Promise<Operation> {
    const ops = requireNodeOps(this.#o.nodeOps);
    if (req.dryRun) {
      const op = this.#newOperation('drain', req, this.#node.activeMachine, this.#node.activeMachine, []);
      const now = new Date(this.#o.clock.now()).toISOString();
      op.result = await dryRunDrain(ops, req);
      Object.assign(op, {
        state: 'succeeded',
        startedAt: now,
        finishedAt: new Date(this.#o.clock.now()).toISOString(),
      });
      return op;
    }
    while (this.#admitting) await this.#admissionEnded;
    this.#assertIdle();
    this.#admitting = true;
    try {
      const active = this.#node.activeMachine;
      const op = this.#newOperation('drain', req, active, active, DRAIN_PHASES);
      return await this.#launch(op, req.wait, (rec, signal) => runDrain(ops, rec, req, signal));
    } finally {
      this.#admitting = false;
    }
  }

  async uncordon(req: UncordonRequest): Promise<Operation> {
    const ops = requireNodeOps(this.#o.nodeOps);
    while (this.#admitting) await this.#admissionEnded;
    this.#assertIdle();
    this.#admitting = true;
    try {
      const active = this.#node.activeMachine;
      const op = this.#newOperation('uncordon', req, active, active, UNCORDON_PHASES);
      return await this.#launch(op, req.wait, (rec) => runUncordon(ops, rec, req), false);
    } finally {
      this.#admitting = false;
    }
  }

  /** Preflight checks of a config (default: what an update with no params would apply). No side effects. */
  async preflight(
    config: AgentConfig | undefined,
    signal: AbortSignal,
  ): Promise<{ config: AgentConfig; checks: PreflightCheck[] }> {
    await this.refreshNode();
    const goal = resolveGoal(
      { config },
      this.#activeRecord?.config ?? null,
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
    const op = filter
      ? this.#running?.rec.op.id === filter
        ? this.#running.rec.op
        : this.#store.get(filter)
      : this.#running?.rec.op;
    return op ? [{ type: 'operation', operation: structuredClone(op) }] : [];
  }

  /**
   * Shutdown: an operation before its point of no return is cancelled (it undoes its work, a safe
   * point); one past it gets up to `graceMs` to finish. What does not finish is left to recovery.
   */
  async shutdown(graceMs: number): Promise<void> {
    const running = this.#running;
    if (running) {
      if (running.cancellable) running.controller.abort(new CancelledError('agentd is shutting down'));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        running.done.catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, graceMs);
        }),
      ]);
      clearTimeout(timer);
      if (this.#running)
        this.#o.logger.warn(
          { operation: running.rec.op.id },
          'shutdown grace over; recovery will finish the operation',
        );
    }
    await this.#refreshing?.catch(() => undefined);
  }

  #findIdempotent(key: string): Operation | undefined {
    if (this.#running?.rec.op.idempotencyKey === key) return this.#running.rec.op;
    return this.#store.findByIdempotencyKey(key);
  }

  #assertIdle(): void {
    const running = this.#running;
    if (running) throw new BusyError(running.rec.op.id, running.rec.op.kind);
    if (this.#admitting) throw new BusyError('(being admitted)', 'update');
  }

  // An accessor, so that every place that ends an admission (`#admitting = false`) also wakes
  // the calls waiting on `#admissionEnded`.
  get #admitting(): boolean {
    return this.#admittingFlag;
  }

  set #admitting(on: boolean) {
    if (on === this.#admittingFlag) return;
    this.#admittingFlag = on;
    if (on) this.#admissionEnded = new Promise((resolve) => (this.#endAdmission = resolve));
    else this.#endAdmission();
  }

  #hasAmbiguousMachines(): boolean {
    return this.#node.warnings.some((w) => w.includes('no journal says which is active'));
  }

  #newOperation(
    kind: OperationKind,
    req: { idempotencyKey?: string; reason?: string; requestedBy: string },
    from: MachineName | null,
    to: MachineName | null,
    phases: readonly string[],
  ): Operation {
    const now = this.#o.clock.now();
    return {
      id: newOperationId(now),
      kind,
      state: 'pending',
      reason: req.reason ?? null,
      requestedBy: req.requestedBy,
      idempotencyKey: req.idempotencyKey ?? null,
      createdAt: new Date(now).toISOString(),
      startedAt: null,
      finishedAt: null,
      from,
      to,
      phases: phases.map((name) => ({
        name,
        state: 'pending',
        startedAt: null,
        finishedAt: null,
        error: null,
      })),
      result: null,
      error: null,
    };
  }

  #recorder(op: Operation): OperationRecorder {
    const o = this.#o;
    return new OperationRecorder(op, {
      store: this.#store,
      events: o.events,
      metrics: o.metrics,
      logger: o.logger,
      clock: o.clock,
    });
  }

  async #recordNoop(req: UpdateRequest, source: MachineName | null): Promise<Operation> {
    const op = this.#newOperation('update', req, source, source, []);
    const rec = this.#recorder(op);
    await rec.start();
    await rec.finish('succeeded', {
      changed: false,
      message: 'the applied config already matches the target; nothing to do (use force to re-provision)',
    });
    return op;
  }

  #dryRunOperation(
    req: UpdateRequest,
    source: MachineName | null,
    target: MachineName,
    goal: AgentConfig,
    changes: ReturnType<typeof diffConfigs>,
    changed: boolean,
  ): Operation {
    const op = this.#newOperation(
      'update',
      req,
      source,
      changed ? target : source,
      changed ? UPDATE_PHASES : [],
    );
    const now = new Date(this.#o.clock.now()).toISOString();
    op.state = 'succeeded';
    op.startedAt = now;
    op.finishedAt = now;
    const skipped = new Set([
      ...(req.drain ? [] : ['drain', 'uncordon']),
      ...(source ? [] : ['stop', 'cleanup']),
    ]);
    op.phases = op.phases.map((p) => ({ ...p, state: skipped.has(p.name) ? 'skipped' : 'pending' }));
    op.result = {
      dryRun: true,
      changed,
      plan: {
        from: source,
        to: changed ? target : source,
        changes,
        phases: op.phases.filter((p) => p.state === 'pending').map((p) => p.name),
        files: changed ? this.#o.provisioner.plannedFiles(target, goal) : [],
        removes:
          changed && source ? [this.#o.paths.machineDir(source), this.#o.paths.appliedConfig(source)] : [],
        configHash: sha256Hex(serializeAgentConfig(goal)),
      },
    };
    return op;
  }

  async #launch(
    op: Operation,
    wait: boolean | undefined,
    run: (
      rec: OperationRecorder,
      signal: AbortSignal,
      hooks: { onPointOfNoReturn: () => void },
    ) => Promise<UpdateOutcome>,
    cancellable = true,
  ): Promise<Operation> {
    const rec = this.#recorder(op);
    const controller = new AbortController();
    const running: Running = { rec, controller, done: Promise.resolve(op), cancellable };
    this.#running = running;
    await this.#store.save(op);
    running.done = (async () => {
      let outcome: UpdateOutcome;
      try {
        outcome = await run(rec, controller.signal, {
          onPointOfNoReturn: () => (running.cancellable = false),
        });
      } catch (err) {
        rec.logger.error({ err: describeError(err) }, 'operation crashed');
        outcome = { state: 'failed', result: op.result ?? {}, error: err };
      }
      try {
        await rec.finish(outcome.state, { ...(op.result ?? {}), ...outcome.result }, outcome.error);
      } catch (err) {
        rec.logger.error({ err: describeError(err) }, 'could not record the end of the operation');
        op.error ??= toErrorInfo(err);
      }
      this.#running = null;
      await this.refreshNode().catch((err: unknown) =>
        rec.logger.warn({ err: describeError(err) }, 'refreshing the node'),
      );
      return op;
    })();
    if (wait) return running.done;
    return structuredClone(op);
  }

  // ---- node snapshot ----------------------------------------------------------------------

  /** Re-read the node from disk and the host. Concurrent callers share one refresh. */
  refreshNode(): Promise<void> {
    this.#refreshing ??= this.#readNode().finally(() => {
      this.#refreshing = null;
    });
    return this.#refreshing;
  }

  async #readNode(): Promise<void> {
    const warnings: string[] = [];
    const records = new Map<MachineName, AppliedConfigRecord>();
    const unreadable = new Map<MachineName, unknown>();
    for (const m of MACHINE_NAMES) {
      try {
        const rec = await this.#applied.read(m);
        if (rec) {
          records.set(m, rec);
          if (!rec.verified) warnings.push(`${m}: applied config has no .sha256 sidecar`);
        }
      } catch (err) {
        unreadable.set(m, err);
        warnings.push(`${m}: ${isAgentError(err) ? `${err.code}: ` : ''}${describeError(err)}`);
      }
    }
    this.#unreadable = unreadable;
    let active: MachineName | null = null;
    try {
      const state = await readNodeState(this.#o.stateDir);
      if (state) active = state.activeMachine;
      else if (records.size === 1 && unreadable.size === 0) active = [...records.keys()][0] ?? null;
      else if (records.size === 0 && unreadable.size === 1) active = [...unreadable.keys()][0] ?? null;
      else if (records.size > 1)
        warnings.push('both machines have applied configs and no journal says which is active');
    } catch (err) {
      warnings.push(`node state: ${describeError(err)}`);
    }
    const machines: MachineStatus[] = [];
    for (const m of MACHINE_NAMES) {
      try {
        const info = await this.#o.machines.inspect(m);
        machines.push({
          name: m,
          state: info.running ? 'running' : info.registered ? 'stopped' : await this.#presentOnDisk(m),
          kubelet: info.kubelet,
        });
      } catch (err) {
        warnings.push(`${m}: cannot inspect: ${describeError(err)}`);
        machines.push({ name: m, state: await this.#presentOnDisk(m), kubelet: 'unknown' });
      }
    }
    if (this.#lastRecovery && !this.#lastRecovery.ok)
      warnings.push(`startup recovery: ${this.#lastRecovery.outcome}`);
    const rec = active ? (records.get(active) ?? null) : null;
    this.#activeRecord = rec;
    this.#node = {
      activeMachine: active,
      applied: rec
        ? { kubernetesVersion: rec.config.Cluster.Version, image: rec.config.OCIImage, hash: rec.hash }
        : null,
      machines,
      cordoned: this.#node.cordoned,
      warnings,
    };
    this.#nodeAt = this.#o.clock.now();
    this.#nodeVersion += 1;
    this.#publishNodeMetrics();
  }

  async #presentOnDisk(m: MachineName): Promise<'stopped' | 'absent'> {
    try {
      await stat(this.#o.paths.machineDir(m));
      return 'stopped';
    } catch {
      return 'absent';
    }
  }

  #publishNodeMetrics(): void {
    const { metrics } = this.#o;
    for (const m of MACHINE_NAMES)
      metrics.activeMachine.set({ machine: m }, this.#node.activeMachine === m ? 1 : 0);
    metrics.appliedInfo.reset();
    const rec = this.#activeRecord;
    if (rec) {
      metrics.appliedInfo.set(
        {
          machine: rec.machine,
          kubernetes_version: rec.config.Cluster.Version,
          image: rec.config.OCIImage,
          hash: rec.hash,
        },
        1,
      );
    }
  }
}
