/**
 * The watch side of the watcher: make sure the Machine exists (self-registration), list it (a
 * list of one, which enqueues the first reconcile), then follow it with the one reflector of
 * src/kube (src/kube/reflector.ts): it watches from the list's resourceVersion with bookmarks,
 * resumes a closed stream from the last resourceVersion seen, lists the Machine again after a 410, and
 * waits the one backoff (or the server's Retry-After) after a failure, reset only once a watch is
 * established (docs/watcher.md, "Watch"). Events only enqueue, and keep the cache the reconciler
 * reads (machine-cache.ts) as new as the watch.
 */
import type { Logger } from 'pino';
import { AgentError, NotFoundError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { createReflector, machineSchema, parseKubeObject } from '../kube/index.js';
import type { Machine, MachineApi, MachineWatch } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import type { MachineCache } from './machine-cache.js';
import type { WatcherState } from './watcher-state.js';

export interface WatchLoopOptions {
  name: string;
  machines: Pick<MachineApi, 'listMachine'>;
  machineWatch: MachineWatch;
  /** Make sure the Machine exists; called until it has succeeded once. */
  ensureMachine: () => Promise<{ created: boolean }>;
  /** Called for every change of the Machine (and after every read). */
  onChange: () => void;
  /** Kept up to date with the Machine the list and the watch deliver (the reconciler reads it). */
  cache?: MachineCache;
  clock: Clock;
  backoff: BackoffPolicy;
  /** A watch open this long counts as established even without events (default 30 s). */
  establishedAfterMs?: number;
  logger: Logger;
  metrics: Pick<Metrics, 'watchEvents' | 'watchRestarts' | 'watchDecodeErrors'>;
  state: WatcherState;
}

/** Run until `signal` aborts. Never throws: every failure is logged, counted and retried. */
export async function runWatchLoop(o: WatchLoopOptions, signal: AbortSignal): Promise<void> {
  const { name, metrics, state, logger } = o;
  let registered = false;

  const reflector = createReflector<Machine>({
    what: `Machine ${name}`,
    async list() {
      if (!registered) {
        const { created } = await o.ensureMachine();
        registered = true;
        if (created) logger.info('registered this node: created its Machine');
      }
      // A list (of one), not a read: the watch starts from the list's resourceVersion.
      const { machine, resourceVersion } = await o.machines.listMachine(name);
      if (machine === null) {
        registered = false;
        throw new NotFoundError(`Machine ${name}`, { data: { machine: name } });
      }
      return { items: [machine], resourceVersion, target: o.machineWatch.target(name) };
    },
    decode: (object) => parseKubeObject(machineSchema, 'Machine', object),
    onList(items) {
      o.cache?.listed(items[0]);
      o.onChange();
    },
    onEvent(type, machine) {
      metrics.watchEvents.inc({ type });
      if (machine.metadata.name !== name) return;
      if (type === 'DELETED') o.cache?.deleted();
      else o.cache?.observed(machine);
      state.event();
      o.onChange();
      if (type === 'DELETED') {
        // The node still exists and runs agentd: register it again, as at start.
        logger.warn('the Machine was deleted; registering this node again');
        registered = false;
        metrics.watchRestarts.inc({ reason: 'closed' });
        reflector.relist();
      }
    },
    onBookmark: () => metrics.watchEvents.inc({ type: 'BOOKMARK' }),
    onDecodeError(err) {
      metrics.watchDecodeErrors.inc();
      state.error(err);
      logger.warn({ err: err.message }, 'a Machine watch event could not be decoded');
    },
    onConnected(connected) {
      state.setConnected(connected);
      if (connected) logger.debug({ resourceVersion: reflector.resourceVersion }, 'watching the Machine');
    },
    onRestart(reason) {
      metrics.watchRestarts.inc({ reason });
      logger.debug({ reason, resourceVersion: reflector.resourceVersion }, 'Machine watch ended; restarting');
    },
    onFailure(err, retryInMs) {
      state.error(err);
      metrics.watchRestarts.inc({ reason: 'error' });
      logger.warn(
        { err: describeError(err), code: err instanceof AgentError ? err.code : undefined, retryInMs },
        'Machine watch failed; retrying',
      );
    },
    clock: o.clock,
    backoff: o.backoff,
    ...(o.establishedAfterMs !== undefined ? { establishedAfterMs: o.establishedAfterMs } : {}),
  });
  await reflector.start(signal);
}
