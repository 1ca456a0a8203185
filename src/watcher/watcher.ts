/**
 * The Machine CR watcher (docs/watcher.md): the watch loop feeds a one-worker queue whose worker
 * reconciles the node's Machine through the rpc client. `start()` after the daemon is ready;
 * `stop()` at step 2 of the shutdown, so it issues no new calls.
 */
import type { Logger } from 'pino';
import type { AgentConfig } from '../config/agent-config.js';
import { NotFoundError, PreconditionFailedError, describeError } from '../errors.js';
import { systemClock } from '../host/clock.js';
import type { Clock } from '../host/types.js';
import type { MachineApi, MachineWatch } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import type { RpcClient } from '../rpc/client.js';
import type { WatcherStatus } from '../rpc/services.js';
import { childLogger } from '../log.js';
import { WATCH_BACKOFF } from '../retry/backoff.js';
import type { BackoffPolicy } from '../retry/backoff.js';
import type { BlockedTargetStore } from './blocked-target.js';
import { MachineCache } from './machine-cache.js';
import { createReconciler } from './reconcile.js';
import type { ReconcilerOptions, ReconcileResult } from './reconcile.js';
import { runWatchLoop } from './watch-loop.js';
import { WatcherState } from './watcher-state.js';
import { WorkQueue } from './work-queue.js';

export interface MachineWatcherOptions {
  /** The Machine to watch (`--machine-name`, else the applied config's MachineName). */
  machineName: string;
  machines: MachineApi;
  /** Where the Machine is watched (`createMachineWatch`). */
  machineWatch: MachineWatch;
  /** The API, in process: `update`, `config.get`, `status`, `operations.wait`. */
  rpc: RpcClient;
  /**
   * The applied config, unredacted, for self-registration (the bootstrap token's id names the
   * Machine's bootstrapTokenRef); null on a node that has not joined.
   */
  registrationConfig: () => AgentConfig | null;
  logger: Logger;
  metrics: Pick<
    Metrics,
    'watchEvents' | 'watchRestarts' | 'watchDecodeErrors' | 'reconciles' | 'reconcileTime'
  >;
  clock?: Clock;
  /** Backoff of watch restarts and failed reconciles (default 0.5 s doubling to 30 s, jittered). */
  backoff?: BackoffPolicy;
  /** Tuning of the reconciler (busy requeue, attempts, how often a wait is looked at). */
  reconcile?: Pick<ReconcilerOptions, 'busyRequeueMs' | 'busyWaitSeconds' | 'maxAttempts' | 'waitPollMs'>;
  /** The durable record of a target that rolled back (the state dir); default: in memory only. */
  blocked?: BlockedTargetStore;
  /** Told the result of every reconcile, and the resourceVersion of the Machine it read (benchmarks, tests). */
  onReconciled?: (result: ReconcileResult, resourceVersion: string | null) => void;
  /** Called after every change of what `status()` answers (the daemon's `status` shows it). */
  onStatusChange?: () => void;
}

export interface MachineWatcher {
  readonly machineName: string;
  start(): void;
  /** Stop watching and reconciling; an update it is waiting for is left to the engine. */
  stop(): Promise<void>;
  status(): WatcherStatus;
  /**
   * Reconcile once more: an operation ended, so what runs (in the Machine's status) and the applied
   * config may have changed. The daemon calls it at the end of every operation.
   */
  poke(): void;
}

export function createMachineWatcher(o: MachineWatcherOptions): MachineWatcher {
  const name = o.machineName;
  const clock = o.clock ?? systemClock;
  const backoff = o.backoff ?? WATCH_BACKOFF;
  // `subsystem`: the parent (the Kubernetes wiring) binds `component` already.
  const logger = childLogger(o.logger, { subsystem: 'watcher', machine: name });
  const state = new WatcherState(name, clock, o.onStatusChange);
  // What the watch delivers, for the reconciler: it reads the Machine from here, not from the API.
  const cache = new MachineCache();
  const reconciler = createReconciler({
    ...o.reconcile,
    name,
    machines: o.machines,
    rpc: o.rpc,
    clock,
    logger,
    ...(o.blocked ? { blocked: o.blocked } : {}),
    onBlocked: (block) => state.setBlocked(block),
    cache,
  });
  const controller = new AbortController();

  const queue = new WorkQueue({
    clock,
    backoff,
    process: async (_key, signal) => {
      const started = performance.now();
      try {
        const result = await reconciler.reconcile(signal);
        if (result.outcome === 'missing') {
          state.error(new NotFoundError(`Machine ${name}`));
        } else {
          state.reconciled();
        }
        o.metrics.reconciles.inc({ result: result.requeueAfterMs === undefined ? 'success' : 'requeue' });
        logger.debug(
          { outcome: result.outcome, resourceVersion: reconciler.lastReadResourceVersion() },
          'reconciled the Machine',
        );
        o.onReconciled?.(result, reconciler.lastReadResourceVersion());
        return result;
      } catch (err) {
        if (!signal.aborted) o.metrics.reconciles.inc({ result: 'error' });
        throw err;
      } finally {
        if (!signal.aborted) o.metrics.reconcileTime.observe((performance.now() - started) / 1000);
      }
    },
    onError: (_key, err, retryInMs) => {
      state.error(err);
      logger.warn({ err: describeError(err), retryInMs }, 'reconcile failed; retrying');
    },
  });

  async function ensureMachine(): Promise<{ created: boolean }> {
    if ((await o.machines.getMachine(name)) !== null) return { created: false };
    const config = o.registrationConfig();
    if (config === null) {
      throw new PreconditionFailedError(
        `Machine ${name} does not exist and this node has not joined yet, so it cannot register itself: create the Machine or join the node first`,
        { data: { machine: name } },
      );
    }
    const result = await o.machines.ensureMachine({ ...config, MachineName: name });
    return { created: result.created };
  }

  let loop: Promise<void> | null = null;
  return {
    machineName: name,
    start() {
      if (loop !== null) return;
      logger.info('Machine watcher starting');
      queue.start();
      loop = runWatchLoop(
        {
          name,
          machines: o.machines,
          machineWatch: o.machineWatch,
          ensureMachine,
          onChange: () => queue.add(name),
          cache,
          clock,
          backoff,
          logger,
          metrics: o.metrics,
          state,
        },
        controller.signal,
      );
    },
    async stop() {
      controller.abort();
      await Promise.all([loop, queue.stop()]);
      logger.info('Machine watcher stopped');
    },
    status: () => state.snapshot(),
    poke() {
      reconciler.appliedMayHaveChanged();
      if (loop !== null && !controller.signal.aborted) queue.add(name);
    },
  };
}
