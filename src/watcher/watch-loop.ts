/**
 * The watch side of the watcher: make sure the Machine exists (self-registration), list it
 * (which enqueues the first reconcile), then watch it from the listed resourceVersion. A stream
 * the server closed resumes from the last resourceVersion seen; a 410 relists first; any other
 * failure restarts after a capped, jittered backoff. client-node's watch does none of this by
 * itself (docs/watcher.md). Events only enqueue: the reconciler reads fresh state.
 *
 * The backoff's failure streak ends only once a watch is established — it delivered an event
 * or a bookmark, or stayed open `establishedAfterMs` — never merely because a request was
 * answered: an API server that answers every watch with 500, or accepts and drops it at once,
 * must see fewer and fewer requests, not a constant storm.
 */
import type { Logger } from 'pino';
import { AgentError, KubeUnavailableError, NotFoundError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { isWatchExpired } from '../kube/index.js';
import { WATCH_ESTABLISHED_AFTER_MS } from '../kube/watch-once.js';
import type { MachineApi, MachineWatchEvent, MachineWatchHandle, WatchMachine } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import { Backoff } from '../retry/backoff.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import type { WatcherState } from './watcher-state.js';

export interface WatchLoopOptions {
  name: string;
  machines: Pick<MachineApi, 'getMachine'>;
  watchMachine: WatchMachine;
  /** Make sure the Machine exists; called until it has succeeded once. */
  ensureMachine: () => Promise<{ created: boolean }>;
  /** Called for every change of the Machine (and after every list). */
  onChange: () => void;
  clock: Clock;
  backoff: BackoffPolicy;
  /** A watch open this long counts as established even without events (default 30 s). */
  establishedAfterMs?: number;
  logger: Logger;
  metrics: Pick<Metrics, 'watchEvents' | 'watchRestarts' | 'watchDecodeErrors'>;
  state: WatcherState;
}

type WatchEnd = AgentError | null | 'aborted';

/** How one watch stream ended, and whether it had been established before it did. */
interface WatchOutcome {
  end: WatchEnd;
  established: boolean;
}

/** Run until `signal` aborts. Never throws: every failure is logged, counted and retried. */
export async function runWatchLoop(o: WatchLoopOptions, signal: AbortSignal): Promise<void> {
  const { name, metrics, state, logger } = o;
  let registered = false;
  let relist = true;
  let resourceVersion: string | undefined;
  const backoff = new Backoff(o.backoff);
  const establishedAfterMs = o.establishedAfterMs ?? WATCH_ESTABLISHED_AFTER_MS;
  /** Set once the open stream delivered something: the API server really serves watches. */
  let established = false;
  /** Ends the open watch stream (set while one is open). */
  let endWatch: ((end: WatchEnd) => void) | null = null;

  const onEvent = (event: MachineWatchEvent): void => {
    if (event.type === 'DECODE_ERROR') {
      metrics.watchDecodeErrors.inc();
      state.error(event.error);
      logger.warn({ err: event.error.message }, 'a Machine watch event could not be decoded');
      return;
    }
    resourceVersion = event.resourceVersion;
    if (!established) {
      established = true;
      backoff.reset();
    }
    metrics.watchEvents.inc({ type: event.type });
    if (event.type === 'BOOKMARK') return;
    if (event.machine.metadata.name !== name) return;
    state.event();
    o.onChange();
    if (event.type === 'DELETED') {
      // The node still exists and runs agentd: register it again, as at start.
      logger.warn('the Machine was deleted; registering this node again');
      registered = false;
      relist = true;
      endWatch?.(null);
    }
  };

  /** One watch stream, from open to end. */
  async function watchOnce(): Promise<WatchOutcome> {
    let finish: (end: WatchEnd) => void = () => undefined;
    const ended = new Promise<WatchEnd>((resolve) => (finish = resolve));
    endWatch = finish;
    established = false;
    const onAbort = (): void => finish('aborted');
    signal.addEventListener('abort', onAbort, { once: true });
    let handle: MachineWatchHandle | undefined;
    try {
      const opening = o
        .watchMachine(name, resourceVersion, onEvent, (err) => finish(err))
        .then((h) => ({
          handle: h,
        }));
      // The stream can end before the handle comes (client-node reports a 500 answer through
      // `onDone` before `watch` returns), and an abort while connecting must not wait for the
      // server: either way the handle is aborted when it comes.
      const first = await Promise.race([opening, ended]);
      if (first === null || first === 'aborted' || first instanceof AgentError) {
        void opening.then(
          (h) => h.handle.abort(),
          () => undefined,
        );
        return { end: first, established: false };
      }
      handle = first.handle;
      const openedAt = o.clock.now();
      state.setConnected(true);
      logger.debug({ resourceVersion }, 'watching the Machine');
      const end = await ended;
      if (!established && o.clock.now() - openedAt >= establishedAfterMs) {
        established = true;
        backoff.reset();
      }
      return { end, established };
    } finally {
      endWatch = null;
      signal.removeEventListener('abort', onAbort);
      handle?.abort();
      state.setConnected(false);
    }
  }

  while (!signal.aborted) {
    let reason: 'closed' | 'gone' | 'error';
    try {
      if (!registered) {
        const { created } = await o.ensureMachine();
        registered = true;
        if (created) logger.info('registered this node: created its Machine');
      }
      if (relist) {
        const machine = await o.machines.getMachine(name);
        if (machine === null) {
          registered = false;
          throw new NotFoundError(`Machine ${name}`, { data: { machine: name } });
        }
        resourceVersion = machine.metadata.resourceVersion;
        relist = false;
        o.onChange();
      }
      const { end, established: wasEstablished } = await watchOnce();
      if (end === 'aborted') break;
      if (end === null) {
        // A stream the server closed after it worked resumes at once; one it closed before
        // delivering anything is a failure like any other (a proxy that drops watches).
        if (!wasEstablished) {
          throw new KubeUnavailableError(
            `watch Machine ${name}: the API server closed the watch before it delivered anything`,
            { data: { reason: 'WatchClosed' } },
          );
        }
        reason = 'closed';
      } else if (isWatchExpired(end)) {
        // The resourceVersion is gone from the server's history: what happened since is unknown.
        reason = 'gone';
        relist = true;
        resourceVersion = undefined;
      } else {
        throw end;
      }
    } catch (err) {
      if (signal.aborted) break;
      reason = 'error';
      state.error(err);
      const delay = backoff.next();
      logger.warn(
        { err: describeError(err), code: err instanceof AgentError ? err.code : undefined, retryInMs: delay },
        'Machine watch failed; retrying',
      );
      metrics.watchRestarts.inc({ reason });
      try {
        await o.clock.sleep(delay, signal);
      } catch {
        break;
      }
      continue;
    }
    metrics.watchRestarts.inc({ reason });
    logger.debug({ reason, resourceVersion }, 'Machine watch ended; restarting');
  }
}
