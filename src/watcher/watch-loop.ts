/**
 * The watch side of the watcher: make sure the Machine exists (self-registration), list it
 * (which enqueues the first reconcile), then watch it from the listed resourceVersion. A stream
 * the server closed resumes from the last resourceVersion seen; a 410 relists first; any other
 * failure restarts after a capped, jittered backoff. client-node's watch does none of this by
 * itself (CONVENTIONS "The watcher"). Events only enqueue: the reconciler reads fresh state.
 */
import type { Logger } from 'pino';
import { AgentError, NotFoundError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { isWatchExpired } from '../kube/index.js';
import type { MachineApi, MachineWatchEvent, MachineWatchHandle, WatchMachine } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import { backoffDelay } from './backoff.js';
import type { BackoffOptions } from './backoff.js';
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
  backoff: BackoffOptions;
  logger: Logger;
  metrics: Pick<Metrics, 'watchEvents' | 'watchRestarts' | 'watchDecodeErrors'>;
  state: WatcherState;
}

type WatchEnd = AgentError | null | 'aborted';

/** Run until `signal` aborts. Never throws: every failure is logged, counted and retried. */
export async function runWatchLoop(o: WatchLoopOptions, signal: AbortSignal): Promise<void> {
  const { name, metrics, state, logger } = o;
  let registered = false;
  let relist = true;
  let resourceVersion: string | undefined;
  let failures = 0;
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
  async function watchOnce(): Promise<WatchEnd> {
    let finish: (end: WatchEnd) => void = () => undefined;
    const ended = new Promise<WatchEnd>((resolve) => (finish = resolve));
    endWatch = finish;
    const onAbort = (): void => finish('aborted');
    signal.addEventListener('abort', onAbort, { once: true });
    let handle: MachineWatchHandle | undefined;
    try {
      const opening = o.watchMachine(name, resourceVersion, onEvent, (err) => finish(err));
      // An abort while connecting must not wait for the server: the handle is aborted when it comes.
      const first = await Promise.race([opening, ended]);
      if (first === 'aborted') {
        void opening.then(
          (h) => h.abort(),
          () => undefined,
        );
        return 'aborted';
      }
      handle = first as MachineWatchHandle;
      state.setConnected(true);
      failures = 0;
      logger.debug({ resourceVersion }, 'watching the Machine');
      return await ended;
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
      const end = await watchOnce();
      if (end === 'aborted') break;
      if (end === null) {
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
      failures += 1;
      const delay = backoffDelay(failures, o.backoff);
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
