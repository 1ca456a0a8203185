/**
 * The node's one operation slot: at most one mutating operation runs, a second is refused with
 * BUSY naming it. Admission (validating a request and creating its operation) is itself
 * exclusive: a call that arrives meanwhile waits for it instead of failing with a placeholder.
 * The slot also launches operations, waits for them, cancels them and drains them at shutdown;
 * once it drains, it admits and launches nothing more (DRAINING).
 */
import type { Logger } from 'pino';
import {
  AgentError,
  BusyError,
  CancelledError,
  DrainingError,
  NotFoundError,
  PreconditionFailedError,
  describeError,
  isAgentError,
} from '../errors.js';
import type { Clock, MachineName } from '../host/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { EngineEvent, EventBus } from './events.js';
import { FINAL_STATES, type Operation, type OperationKind } from './operation.js';
import { OperationRecorder, toErrorInfo } from './operation-recorder.js';
import { newOperationId, type OperationStore } from './operation-store.js';
import type { UpdateOutcome } from './update.js';

export interface OperationRequestInfo {
  idempotencyKey?: string;
  reason?: string;
  requestedBy: string;
}

/** Runs an operation to its outcome; `onPointOfNoReturn` makes it non-cancellable. */
export type OperationBody = (
  rec: OperationRecorder,
  signal: AbortSignal,
  hooks: { onPointOfNoReturn: () => void },
) => Promise<UpdateOutcome>;

/** An operation that has been started: its first snapshot, and its end. */
export interface Launched {
  readonly snapshot: Operation;
  readonly done: Promise<Operation>;
}

function isLaunched(v: Operation | Launched): v is Launched {
  return 'done' in v && 'snapshot' in v;
}

interface Running {
  rec: OperationRecorder;
  controller: AbortController;
  done: Promise<Operation>;
  /** False once the operation passed its point of no return (the source is stopping). */
  cancellable: boolean;
  /** False for kinds that are never cancellable (reset, uncordon): they run to their end. */
  everCancellable: boolean;
}

/**
 * Work that shutdown's grace did not see end: the operation still running, or null when no
 * operation had started but an admission or `exclusive` bookkeeping was still under way.
 */
export interface InFlight {
  operation: Operation | null;
}

export interface OperationSlotOptions {
  store: OperationStore;
  events: EventBus;
  metrics: Metrics;
  logger: Logger;
  clock: Clock;
  /** Called whenever the running operation changes (it is shown by `status`). */
  onChange?: () => void;
  /**
   * Called when an operation's work is done, before its end is recorded and published: the
   * engine re-reads the node here, so whoever learns that it ended sees its effect.
   */
  beforeFinish?: () => Promise<void>;
  /** Called after every operation ends. */
  afterOperation?: () => void;
}

export class OperationSlot {
  readonly #o: OperationSlotOptions;
  #running: Running | null = null;
  #admittingFlag = false;
  /**
   * Resolves when the admission under way ends. Callers re-check after every wake-up, and
   * nothing awaits between their last check and taking the admission, so two never both admit.
   */
  #admissionEnded: Promise<void> = Promise.resolve();
  #endAdmission: () => void = () => undefined;
  /** Set by `drain`: nothing is admitted or launched any more. */
  #closed = false;

  constructor(options: OperationSlotOptions) {
    this.#o = options;
  }

  /** The running operation, if any. */
  get current(): Operation | null {
    return this.#running?.rec.op ?? null;
  }

  get(id: string): Operation {
    const op = this.#running?.rec.op.id === id ? this.#running.rec.op : this.#o.store.get(id);
    if (!op) throw new NotFoundError(`operation ${id}`);
    return op;
  }

  findIdempotent(key: string): Operation | undefined {
    if (this.#running?.rec.op.idempotencyKey === key) return this.#running.rec.op;
    return this.#o.store.findByIdempotencyKey(key);
  }

  /**
   * Admit one mutating request: wait out another admission, refuse with BUSY while an operation
   * runs, then run `fn` holding the admission. `fn` usually ends by launching an operation.
   */
  async admit(
    fn: () => Promise<Operation | Launched>,
    wait?: boolean,
    before?: () => Operation | Promise<Operation> | undefined,
  ): Promise<Operation> {
    // Re-checked after every wake-up; nothing awaits between the last check and taking the
    // admission, so two callers never both admit.
    while (this.#admittingFlag) await this.#admissionEnded;
    // `before` answers without an operation of its own (an idempotent replay); synchronous.
    const early = before?.();
    if (early !== undefined) return early;
    if (this.#closed) throw new DrainingError();
    const running = this.#running;
    if (running) throw new BusyError(running.rec.op.id, running.rec.op.kind);
    this.#setAdmitting(true);
    let out: Operation | Launched;
    try {
      out = await fn();
    } finally {
      this.#setAdmitting(false);
    }
    if (!isLaunched(out)) return out;
    return wait ? out.done : out.snapshot;
  }

  /**
   * Run `fn` while no operation runs and none is being admitted (it waits for both); requests
   * that arrive meanwhile wait for it as for an admission. For short bookkeeping that must not
   * interleave with an operation's journal writes. Never call it from inside an operation.
   */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    for (;;) {
      while (this.#admittingFlag) await this.#admissionEnded;
      const running = this.#running;
      if (!running) break;
      await running.done.catch(() => undefined);
    }
    if (this.#closed) throw new DrainingError();
    this.#setAdmitting(true);
    try {
      return await fn();
    } finally {
      this.#setAdmitting(false);
    }
  }

  #setAdmitting(on: boolean): void {
    if (on === this.#admittingFlag) return;
    this.#admittingFlag = on;
    if (on) this.#admissionEnded = new Promise((resolve) => (this.#endAdmission = resolve));
    else this.#endAdmission();
  }

  /** A new operation record (pending, every phase pending). */
  create(
    kind: OperationKind,
    req: OperationRequestInfo,
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

  recorder(op: Operation): OperationRecorder {
    const o = this.#o;
    return new OperationRecorder(op, {
      store: o.store,
      events: o.events,
      metrics: o.metrics,
      logger: o.logger,
      clock: o.clock,
    });
  }

  /**
   * Start `body` as the running operation (call it inside `admit`). When its first record cannot
   * be written (a state dir that cannot be written), nothing starts: the slot is free again, the
   * operation is not in the history, and the caller gets the error naming the file. Once the
   * slot drains, an admission that was under way launches nothing: DRAINING. Resolves once the
   * body has started the operation (`rec.start()`) or ended, with the operation as it is then.
   */
  async launch(op: Operation, body: OperationBody, cancellable = true): Promise<Launched> {
    if (this.#closed) throw new DrainingError();
    const rec = this.recorder(op);
    const controller = new AbortController();
    const running: Running = {
      rec,
      controller,
      done: Promise.resolve(op),
      cancellable,
      everCancellable: cancellable,
    };
    this.#running = running;
    this.#o.onChange?.();
    try {
      await this.#o.store.save(op);
    } catch (err) {
      this.#running = null;
      this.#o.store.forget(op.id);
      this.#o.onChange?.();
      rec.logger.error(
        { err: describeError(err) },
        'the operation could not be started: its record cannot be written',
      );
      throw isAgentError(err)
        ? new AgentError(err.code, `cannot start the ${op.kind}: ${err.message}`, {
            cause: err,
            data: err.data,
          })
        : err;
    }
    running.done = (async () => {
      let outcome: UpdateOutcome;
      try {
        outcome = await body(rec, controller.signal, {
          onPointOfNoReturn: () => (running.cancellable = false),
        });
      } catch (err) {
        rec.logger.error({ err: describeError(err) }, 'operation crashed');
        outcome = { state: 'failed', result: op.result ?? {}, error: err };
      }
      await this.#o
        .beforeFinish?.()
        .catch((err: unknown) => rec.logger.warn({ err: describeError(err) }, 'refreshing the node'));
      try {
        await rec.finish(outcome.state, { ...(op.result ?? {}), ...outcome.result }, outcome.error);
      } catch (err) {
        rec.logger.error({ err: describeError(err) }, 'could not record the end of the operation');
        op.error ??= toErrorInfo(err);
      }
      this.#running = null;
      this.#o.onChange?.();
      this.#o.afterOperation?.();
      return op;
    })();
    // Answered once the operation has started (an update's journal is on disk) or has ended
    // before it could: the caller, and the watcher's status write that follows the answer, never
    // race the first durable writes, and a crash after the answer is always recovered.
    await Promise.race([rec.started, running.done]);
    return { snapshot: structuredClone(op), done: running.done };
  }

  /** The operation once it ends, or as it is when `timeoutMs` passes. */
  async wait(id: string, timeoutMs: number | undefined): Promise<Operation> {
    const op = this.get(id);
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

  /** Cancel the running operation before its point of no return; it then undoes what it did. */
  cancel(id: string): Operation {
    const op = this.get(id);
    const running = this.#running;
    if (FINAL_STATES.has(op.state) || !running || running.rec.op.id !== id) {
      throw new PreconditionFailedError(`operation ${id} already ended (${op.state})`, {
        data: { state: op.state },
      });
    }
    if (!running.everCancellable) {
      throw new PreconditionFailedError(
        `operation ${id} (${op.kind}) cannot be cancelled: a ${op.kind} runs to its end; follow it with agentctl ops wait ${id}`,
        { data: { phase: op.phases.find((p) => p.state === 'running')?.name ?? null } },
      );
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

  /** Events a new follower of `/v1/events` gets first: the state of the operation it follows. */
  currentEvents(filter: string | null): EngineEvent[] {
    const running = this.#running?.rec.op;
    const op = filter ? (running?.id === filter ? running : this.#o.store.get(filter)) : running;
    return op ? [{ type: 'operation', operation: structuredClone(op) }] : [];
  }

  /**
   * Shutdown (docs/architecture.md, "Lifecycle"): from now on nothing is admitted or launched
   * (DRAINING). An admission under way ends first (it can no longer launch); then an operation
   * before its point of no return is cancelled (it undoes its work, a safe point), and one past
   * it may finish; all within `graceMs` in total. Resolves to what is still in flight when the
   * grace is over (recovery at the next start completes it), or null when nothing is.
   */
  async drain(graceMs: number): Promise<InFlight | null> {
    this.#closed = true;
    // On the injected clock like every other wait; the timer ends as soon as the work does.
    const stop = new AbortController();
    let over = false;
    const grace = this.#o.clock.sleep(graceMs, stop.signal).then(
      () => (over = true),
      () => undefined,
    );
    try {
      while (this.#admittingFlag && !over) await Promise.race([this.#admissionEnded, grace]);
      const running = this.#running;
      if (running && !over) {
        if (running.cancellable) running.controller.abort(new CancelledError('agentd is shutting down'));
        await Promise.race([running.done.catch(() => undefined), grace]);
      }
    } finally {
      stop.abort();
    }
    if (this.#running) return { operation: structuredClone(this.#running.rec.op) };
    return this.#admittingFlag ? { operation: null } : null;
  }
}
