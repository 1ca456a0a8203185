/**
 * Follow one operation until it ends: subscribe to `GET /v1/events?operation=<id>`, feed every
 * event to the model and the display, and fetch `operations.get` for the final word. Handles
 * the operation ending before the stream opened, a stream the daemon closes early (reconnect),
 * an agentd without `/v1/events` (poll `operations.wait`), a follow timeout and a detach.
 */
import type { Clock } from '../../host/types.js';
import { CliError, EXIT } from '../exit-codes.js';
import { isFinal, type Operation } from '../types.js';
import { EventStreamUnavailableError, type OpenEventStream } from './stream-types.js';
import type { FollowModel, ModelChange } from './progress-model.js';

/** How following ended. `operation` is the latest state seen. */
export type FollowOutcome =
  | { kind: 'ended'; operation: Operation }
  | { kind: 'timeout'; operation: Operation }
  | { kind: 'detached'; operation: Operation };

/** Receives every change of the model (the live view or the plain lines). */
export type ChangeSink = (change: ModelChange) => void;

export interface FollowOptions {
  /** The operation as last seen (what `update` answered, or `operations.get`). */
  operation: Operation;
  model: FollowModel;
  onChange: ChangeSink;
  openStream: OpenEventStream;
  getOperation(id: string): Promise<Operation>;
  /** `operations.wait` with a timeout, for an agentd that has no event stream. */
  waitOperation(id: string, timeoutSeconds: number): Promise<Operation>;
  clock: Clock;
  /** Stop following after this long (ms); none by default. */
  timeoutMs?: number;
  /** Aborting detaches (Ctrl-C): following stops, the operation keeps running. */
  signal?: AbortSignal;
  /** Consecutive early stream ends tolerated before giving up (default 5). */
  maxReconnects?: number;
}

/** How long one `operations.wait` call of the fallback may block (seconds). */
const POLL_WAIT_SECONDS = 10;

export async function followOperation(o: FollowOptions): Promise<FollowOutcome> {
  const { model } = o;
  const id = o.operation.id;
  const take = (op: Operation): boolean => {
    const change = model.applyOperation(op);
    if (change) o.onChange(change);
    return isFinal(op);
  };
  const latest = (): Operation => model.operation ?? o.operation;
  /** The model holds a final state (from the stream's last event): nothing read later undoes it. */
  const ended = (): boolean => model.operation !== null && isFinal(model.operation);
  if (take(o.operation)) return { kind: 'ended', operation: latest() };

  // One controller stops everything: the timeout, a detach, or the end of following.
  const stop = new AbortController();
  let why: 'timeout' | 'detached' | null = null;
  const stopped = new Promise<'stopped'>((resolve) =>
    stop.signal.addEventListener('abort', () => resolve('stopped'), { once: true }),
  );
  const onDetach = (): void => {
    why ??= 'detached';
    stop.abort();
  };
  if (o.signal?.aborted) onDetach();
  o.signal?.addEventListener('abort', onDetach, { once: true });
  if (o.timeoutMs !== undefined) {
    o.clock.sleep(o.timeoutMs, stop.signal).then(
      () => {
        why ??= 'timeout';
        stop.abort();
      },
      () => undefined,
    );
  }
  // An RPC that may block (operations.wait) must not hold up a detach or a timeout.
  // Stopped wins even when both have settled by the time the race looks.
  const unlessStopped = async <T>(p: Promise<T>): Promise<T | 'stopped'> => {
    const first = await Promise.race([p, stopped]);
    return stop.signal.aborted ? 'stopped' : first;
  };

  try {
    let earlyEnds = 0;
    while (!stop.signal.aborted) {
      let stream;
      try {
        stream = await o.openStream(id);
      } catch (err) {
        if (err instanceof EventStreamUnavailableError) return await poll();
        throw err;
      }
      const close = (): void => stream.close();
      // An abort listener added after the abort never runs: close at once then.
      if (stop.signal.aborted) close();
      stop.signal.addEventListener('abort', close, { once: true });
      try {
        // Subscribed: nothing can be missed from here on. The operation may have ended before
        // the stream opened (or the daemon may not know it any more), so look once.
        const now = await unlessStopped(o.getOperation(id));
        if (now === 'stopped') break;
        if (take(now)) return { kind: 'ended', operation: latest() };
        for await (const event of stream) {
          const change = model.apply(event, o.clock.now());
          if (change) o.onChange(change);
          if (ended()) break;
        }
      } finally {
        stop.signal.removeEventListener('abort', close);
        stream.close();
      }
      if (ended()) {
        // The stream's final event ended it: operations.get gives the final word, unless its
        // answer is older than that event (it raced the end; the model keeps the final state)
        // or does not come (the end is known already).
        const after = await unlessStopped(o.getOperation(id)).catch(() => 'stopped' as const);
        if (after !== 'stopped') take(after);
        return { kind: 'ended', operation: latest() };
      }
      if (stop.signal.aborted) break;
      // The daemon closed the stream before the operation ended: ask for its state.
      const after = await unlessStopped(o.getOperation(id));
      if (after === 'stopped') break;
      if (take(after)) return { kind: 'ended', operation: latest() };
      earlyEnds += 1;
      if (earlyEnds > (o.maxReconnects ?? 5)) {
        throw new CliError(
          EXIT.FAILED,
          `the daemon closed the event stream of operation ${id} ${earlyEnds} times before it ended`,
          { code: 'STREAM_CLOSED', operation: id },
        );
      }
      await o.clock.sleep(250 * earlyEnds, stop.signal).catch(() => undefined);
    }
    return { kind: why ?? 'detached', operation: latest() };
  } finally {
    o.signal?.removeEventListener('abort', onDetach);
    stop.abort();
  }

  async function poll(): Promise<FollowOutcome> {
    while (!stop.signal.aborted) {
      const op = await unlessStopped(o.waitOperation(id, POLL_WAIT_SECONDS));
      if (op === 'stopped') break;
      if (take(op)) return { kind: 'ended', operation: latest() };
    }
    return { kind: why ?? 'detached', operation: latest() };
  }
}
