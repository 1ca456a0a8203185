/**
 * The Machine CR watcher's supervisor: starts the watcher once the daemon is ready and the
 * Kubernetes session has what it needs (credentials, a Machine name), looks again whenever an
 * operation ends (a join brings both), keeps the reason why it does not run for `status`, and
 * stops it at shutdown. The watcher's code (and @kubernetes/client-node with it) is loaded only
 * when it starts. Once Kubernetes is available, with or without the watcher (`--no-watch`), it
 * also starts the watch of this node's cordon that `status` shows (`KubeSession.followCordon`).
 */
import type { Logger } from 'pino';
import type { AgentConfig } from '../config/agent-config.js';
import type { DaemonConfig } from '../config/daemon-config.js';
import { createBlockedTargetFile } from './blocked-target.js';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import type { KubeSession } from '../kube/session.js';
import { createRpcClient } from '../rpc/client.js';
import type { Dispatcher } from '../rpc/dispatcher.js';
import { createInProcessTransport } from '../rpc/in-process-transport.js';
import type { WatcherStatus } from '../rpc/services.js';
import type { MachineWatcher, MachineWatcherOptions } from './watcher.js';

export interface WatcherSupervisorOptions {
  config: Pick<DaemonConfig, 'watch' | 'stateDir'>;
  session: KubeSession;
  /** The applied config, unredacted, for self-registration. */
  registrationConfig: () => AgentConfig | null;
  /** Re-read the node before deciding whether the watcher can start. */
  refreshNode?: () => Promise<void>;
  /** Subscribe to "an operation ended"; returns the unsubscribe. */
  onOperationEnded: (listener: () => void) => () => void;
  logger: Logger;
  clock: Clock;
  metrics: MachineWatcherOptions['metrics'];
  /** Called after every change of what `status()` answers. */
  onStatusChange?: () => void;
  /** Watcher tuning (tests, benchmarks). */
  watcher?: Pick<MachineWatcherOptions, 'backoff' | 'reconcile' | 'onReconciled'>;
}

export interface WatcherSupervisor {
  /** After ready: start the watcher when it should run; look again whenever an operation ends. */
  start(dispatcher: Pick<Dispatcher, 'handle'>): void;
  status(): WatcherStatus;
  /** Stop the watcher (shutdown step 1): it issues no new calls afterwards. */
  stop(): Promise<void>;
}

export function createWatcherSupervisor(o: WatcherSupervisorOptions): WatcherSupervisor {
  const { config, session, logger } = o;
  const changed = (): void => o.onStatusChange?.();
  let watcher: MachineWatcher | null = null;
  let dispatcher: Pick<Dispatcher, 'handle'> | null = null;
  let whyOff = 'the daemon is not ready yet';
  /** Why the watcher does not run; `status` shows it. */
  const setReason = (value: string): void => {
    whyOff = value;
    changed();
  };
  let stopped = false;
  let unsubscribe: (() => void) | null = null;
  let checking: Promise<void> | null = null;
  let checkAgain = false;
  /** The watch of this node's cordon, and what stops it. */
  let cordonFollowed: Promise<void> | null = null;
  const stopCordon = new AbortController();

  function whyNoWatcher(): string | null {
    if (config.watch === false) return 'disabled by --no-watch';
    return session.unavailableReason();
  }

  async function startIfPossible(): Promise<void> {
    if (stopped || watcher !== null || dispatcher === null) return;
    await o.refreshNode?.().catch(() => undefined);
    await session.load();
    if (stopped || watcher !== null) return;
    // This node's cordon, for `status`: followed whenever Kubernetes is available, watcher or not.
    if (session.unavailableReason() === null) cordonFollowed ??= session.followCordon(stopCordon.signal);
    const why = whyNoWatcher();
    if (why !== null) {
      noteWhyOff(why);
      return;
    }
    const [{ createMachineWatcher }, { runtime: rt, clients: c, machineName }] = await Promise.all([
      import('./watcher.js'),
      session.connect(),
    ]);
    if (stopped || watcher !== null) return;
    watcher = createMachineWatcher({
      ...o.watcher,
      machineName,
      machines: rt.createMachineApi({ custom: c.custom, group: c.crdGroup, clock: o.clock }),
      machineWatch: rt.createMachineWatch({ kc: c.kc, group: c.crdGroup, transport: c.transport }),
      rpc: createRpcClient(createInProcessTransport(dispatcher, 'watcher')),
      // A target that rolled back stays blocked across restarts of agentd (docs/watcher.md).
      blocked: createBlockedTargetFile(config.stateDir, logger),
      registrationConfig: o.registrationConfig,
      logger,
      metrics: o.metrics,
      clock: o.clock,
      onStatusChange: changed,
    });
    changed();
    watcher.start();
  }

  /** Log and show a new reason why the watcher does not run. */
  function noteWhyOff(why: string): void {
    if (why === whyOff) return;
    const level = config.watch === true ? 'warn' : 'info';
    logger[level]({ reason: why }, 'the Machine watcher does not run');
    setReason(why);
  }

  /** Look (again) whether the watcher can start; calls during a look make it look once more. */
  function recheck(): void {
    if (checking !== null) {
      checkAgain = true;
      return;
    }
    checking = (async () => {
      do {
        checkAgain = false;
        await startIfPossible().catch((err: unknown) => {
          setReason(`cannot start the watcher: ${describeError(err)}`);
          logger.warn({ err: describeError(err) }, 'cannot start the Machine watcher');
        });
      } while (checkAgain && !stopped);
    })().finally(() => {
      checking = null;
    });
  }

  return {
    start(d) {
      dispatcher = d;
      unsubscribe = o.onOperationEnded(() => {
        // A join may have brought what the watcher needs; once it runs, the Machine's status
        // says what runs now (docs/watcher.md, "What runs").
        if (watcher === null) recheck();
        else watcher.poke();
      });
      // Say at once why the watcher cannot run when that is known without I/O (the first look
      // re-reads the node first), so the first status after ready does not say "not ready".
      const why = whyNoWatcher();
      if (why !== null) noteWhyOff(why);
      recheck();
    },
    status() {
      if (watcher !== null) return watcher.status();
      return {
        enabled: false,
        reason: whyOff,
        connected: false,
        machineName: session.machineName(),
        lastEventAt: null,
        lastReconcileAt: null,
        lastError: null,
        lastErrorCode: null,
        blocked: null,
      };
    },
    async stop() {
      stopped = true;
      unsubscribe?.();
      await checking;
      stopCordon.abort();
      await Promise.all([watcher?.stop(), cordonFollowed]);
    },
  };
}
