/**
 * Records one running operation: phase transitions (persisted, published as events, logged one
 * line each, measured), progress, and the final state.
 */
import type { Logger } from 'pino';
import { isAgentError, describeError } from '../errors.js';
import type { Clock, ProgressEvent } from '../host/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { EventBus } from './events.js';
import type { ErrorInfo, Operation, OperationState, OperationWait, PhaseState } from './operation.js';
import type { OperationStore } from './operation-store.js';

/** An error as recorded in an operation. */
export function toErrorInfo(err: unknown): ErrorInfo {
  if (isAgentError(err)) {
    return Object.keys(err.data).length > 0
      ? { code: err.code, message: err.message, data: err.data }
      : { code: err.code, message: err.message };
  }
  return { code: 'INTERNAL', message: describeError(err) };
}

/** In an operation's `result.warnings` when its record could not be written at times. */
export const LATE_RECORD_WARNING =
  'agentd could not write this record at times (the disk full or no descriptor left): it was written late';

export class OperationRecorder {
  readonly op: Operation;
  readonly #store: OperationStore;
  readonly #events: EventBus;
  readonly #metrics: Metrics;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #phaseStarted = new Map<string, number>();
  #currentPhase = '';
  #lastProgress = 0;
  /** Whether a write of this operation's record failed (it is written late; its result says so). */
  #unrecorded = false;
  #markStarted!: () => void;
  /**
   * Resolves once the operation has started (`start`): for an update, once its switch-over
   * journal is on disk. The launch answers its caller then (docs/api.md, "update").
   */
  readonly started: Promise<void> = new Promise((resolve) => (this.#markStarted = resolve));

  constructor(
    op: Operation,
    deps: { store: OperationStore; events: EventBus; metrics: Metrics; logger: Logger; clock: Clock },
  ) {
    this.op = op;
    this.#store = deps.store;
    this.#events = deps.events;
    this.#metrics = deps.metrics;
    this.#logger = deps.logger.child({ operation: op.id, kind: op.kind });
    this.#clock = deps.clock;
  }

  get logger(): Logger {
    return this.#logger;
  }

  #now(): string {
    return new Date(this.#clock.now()).toISOString();
  }

  /**
   * Best-effort (docs/operations.md, "A full disk, exhausted descriptors"): a record that cannot
   * be written never stops the operation; it is written later, and the event goes out now.
   */
  async #persist(): Promise<void> {
    if (!(await this.#store.record(this.op))) this.#unrecorded = true;
    this.#events.publish({ type: 'operation', operation: structuredClone(this.op) });
  }

  async start(): Promise<void> {
    this.op.state = 'running';
    this.op.startedAt = this.#now();
    this.#logger.info(
      { from: this.op.from, to: this.op.to, reason: this.op.reason },
      `${this.op.kind} ${this.op.id} started${this.op.to ? ` (to ${this.op.to})` : ''}`,
    );
    this.#markStarted();
    await this.#persist();
  }

  #phase(name: string) {
    let p = this.op.phases.find((ph) => ph.name === name);
    if (!p) {
      p = { name, state: 'pending', startedAt: null, finishedAt: null, error: null };
      this.op.phases.push(p);
    }
    return p;
  }

  async phaseStarted(name: string): Promise<void> {
    const p = this.#phase(name);
    p.state = 'running';
    p.startedAt = this.#now();
    this.#currentPhase = name;
    this.#phaseStarted.set(name, this.#clock.now());
    this.#logger.info({ phase: name }, `phase ${name} started (${this.op.id})`);
    this.#events.publish({
      type: 'phase',
      operationId: this.op.id,
      phase: name,
      state: 'running',
      at: p.startedAt,
    });
    await this.#persist();
  }

  /** What the operation waits for (null: it no longer waits); persisted and published. */
  async setWait(wait: OperationWait | null): Promise<void> {
    if (wait === null) {
      if (this.op.wait === undefined) return;
      delete this.op.wait;
    } else {
      this.op.wait = { ...wait };
      this.#logger.info({ phase: this.#currentPhase, wait: wait.reason, message: wait.message }, 'waiting');
    }
    await this.#persist();
  }

  async phaseEnded(
    name: string,
    state: Exclude<PhaseState, 'pending' | 'running'>,
    err?: unknown,
  ): Promise<void> {
    // A phase that ends no longer waits.
    delete this.op.wait;
    const p = this.#phase(name);
    p.state = state;
    p.finishedAt = this.#now();
    p.error = err === undefined ? null : toErrorInfo(err);
    const started = this.#phaseStarted.get(name);
    const seconds = started === undefined ? 0 : (this.#clock.now() - started) / 1000;
    if (state !== 'skipped') this.#metrics.phaseDuration.observe({ phase: name, result: state }, seconds);
    this.#logger[state === 'failed' ? 'warn' : 'info'](
      {
        phase: name,
        state,
        durationMs: Math.round(seconds * 1000),
        ...(p.error ? { error: p.error.message } : {}),
      },
      `phase ${name} ended: ${state} (${this.op.id})`,
    );
    this.#events.publish({
      type: 'phase',
      operationId: this.op.id,
      phase: name,
      state,
      at: p.finishedAt,
      ...(p.error ? { error: p.error.message } : {}),
    });
    await this.#persist();
  }

  /**
   * Mark every phase that never ran as skipped, and publish each on the event stream in phase
   * order: a follower then sees them end where they did, before what comes next (a rollback).
   * Persisted with the next change of the operation.
   */
  skipPending(): void {
    const at = this.#now();
    for (const p of this.op.phases) {
      if (p.state !== 'pending') continue;
      p.state = 'skipped';
      this.#events.publish({ type: 'phase', operationId: this.op.id, phase: p.name, state: 'skipped', at });
    }
  }

  /** Progress inside the current phase (downloads); throttled to ~10 events/s. */
  progress(event: ProgressEvent): void {
    const now = this.#clock.now();
    const final = event.totalBytes !== undefined && event.bytes === event.totalBytes;
    if (!final && now - this.#lastProgress < 100) return;
    this.#lastProgress = now;
    this.#events.publish({
      type: 'progress',
      operationId: this.op.id,
      phase: this.#currentPhase,
      ...event,
      at: this.#now(),
    });
  }

  async finish(state: OperationState, result: Record<string, unknown> | null, err?: unknown): Promise<void> {
    this.op.state = state;
    this.op.finishedAt = this.#now();
    this.op.error = err === undefined ? null : toErrorInfo(err);
    // An ended operation shows no phase still running or pending.
    for (const p of this.op.phases) {
      if (p.state === 'running') {
        p.state = 'failed';
        p.finishedAt = this.op.finishedAt;
        p.error ??= this.op.error ?? {
          code: 'INTERNAL',
          message: `the ${this.op.kind} ended during this phase`,
        };
      } else if (p.state === 'pending') {
        p.state = 'skipped';
      }
    }
    this.op.result = result;
    if (this.#unrecorded) this.#noteLate();
    const seconds = this.op.startedAt
      ? (Date.parse(this.op.finishedAt) - Date.parse(this.op.startedAt)) / 1000
      : 0;
    this.#metrics.operations.inc({ kind: this.op.kind, result: state });
    this.#metrics.operationDuration.observe({ kind: this.op.kind, result: state }, seconds);
    if (state === 'succeeded')
      this.#metrics.lastSuccess.set({ kind: this.op.kind }, this.#clock.now() / 1000);
    this.#logger[state === 'succeeded' ? 'info' : 'warn'](
      {
        state,
        durationMs: Math.round(seconds * 1000),
        ...(this.op.error ? { error: this.op.error.message } : {}),
      },
      `${this.op.kind} ${this.op.id} finished: ${state}`,
    );
    const late = this.#unrecorded;
    await this.#persist();
    if (!late && this.#unrecorded) {
      // The end itself could not be written: it is owed, and says so when it is written.
      this.#noteLate();
      await this.#store.record(this.op);
    }
  }

  /** Say in the result that the record was written late. */
  #noteLate(): void {
    const result = this.op.result ?? {};
    const warnings = Array.isArray(result.warnings) ? (result.warnings as string[]) : [];
    this.op.result = { ...result, warnings: [...warnings, LATE_RECORD_WARNING] };
  }
}
