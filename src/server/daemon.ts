/**
 * The daemon's lifecycle: startup in dependency order, and the one shutdown function whose
 * order DESIGN §9 fixes. Collaborators come in through options with production defaults.
 */
import { captureMachineDiagnostics } from '../host/machine-diagnostics.js';
import { rm } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { DaemonConfig } from '../config/daemon-config.js';
import { Engine } from '../engine/engine.js';
import { EventBus } from '../engine/events.js';
import { StatusVersion } from '../engine/status-version.js';
import { PreconditionFailedError, describeError } from '../errors.js';
import { systemClock } from '../host/clock.js';
import { createSdNotifier } from './sd-notify.js';
import { createHostPaths } from '../host/paths.js';
import { inspectPidFile, removePidFile, writePidFile } from '../host/pid-file.js';
import type { Clock } from '../host/types.js';
import { createMetrics, type Metrics } from '../metrics/metrics.js';
import { createDispatcher, type Dispatcher } from '../rpc/dispatcher.js';
import { METHOD_LIST } from '../rpc/methods/index.js';
import { buildOpenRpcDocument } from '../rpc/openrpc.js';
import type { DaemonInfo, DaemonState, RpcServices, WatcherStatus } from '../rpc/services.js';
import { VERSION } from '../version.js';
import { createAdminApp, createMetricsApp, type Readiness } from './app.js';
import { createHost, type Host } from './host-wiring.js';
import { createKubeWiring, type KubeWiring } from './kube-wiring.js';
import { buildOpenApiDocument } from './openapi.js';
import { createProvisioner } from '../provision/provisioner.js';
import { listenUnix, prepareSocketPath, resolveGroup } from './socket.js';

export interface DaemonDeps {
  logger: Logger;
  clock?: Clock;
  /** Replace the host wiring (tests). */
  host?: Host;
  env?: NodeJS.ProcessEnv;
}

export interface Daemon {
  readonly config: DaemonConfig;
  readonly engine: Engine;
  readonly metrics: Metrics;
  readonly dispatcher: Dispatcher;
  info(): DaemonInfo;
  /** Resolves when shutdown has finished (after `stop`). */
  readonly stopped: Promise<void>;
  stop(reason: string): Promise<void>;
}

/** Start agentd: PID file, socket, HTTP, recovery, then ready. Throws with a clear error on any failure. */
export async function startDaemon(config: DaemonConfig, deps: DaemonDeps): Promise<Daemon> {
  const { logger } = deps;
  const clock = deps.clock ?? systemClock;
  const sdNotify = createSdNotifier({ env: deps.env ?? process.env, logger, clock });
  const startedAt = new Date(clock.now()).toISOString();
  // What `status` shows changes with every input; each bumps this (docs/architecture.md).
  const statusVersion = new StatusVersion();
  const daemonState = statusVersion.cell<DaemonState>('starting');
  const readinessReasons: string[] = ['startup recovery has not finished'];

  // 1. The PID file first: it is the lock that keeps two daemons off one node.
  const pidState = await inspectPidFile(config.pidFile);
  if (pidState.kind === 'agentd' && pidState.pid !== process.pid) {
    throw new PreconditionFailedError(
      `agentd is already running as pid ${pidState.pid} (PID file ${config.pidFile}); stop it first with agentctl stop`,
    );
  }
  if (pidState.kind === 'garbage' || pidState.kind === 'dead' || pidState.kind === 'foreign') {
    logger.warn({ pidFile: config.pidFile, found: pidState }, 'replacing a stale PID file');
  }
  // 2. The socket path: refuse a live daemon before writing anything of ours.
  await prepareSocketPath(config.socket);
  const gid = config.socketGroup === null ? null : await resolveGroup(config.socketGroup);
  await writePidFile(config.pidFile, process.pid);

  const cleanupFiles = async (): Promise<void> => {
    await rm(config.socket, { force: true }).catch(() => undefined);
    await removePidFile(config.pidFile, process.pid);
  };

  let admin: FastifyInstance | null = null;
  let metricsApp: FastifyInstance | null = null;
  let host: Host | null = null;
  let kube: KubeWiring | null = null;
  // From here on (covered by the failure path below), so that a recovery that wedges is
  // restarted by systemd too.
  const stopWatchdog = sdNotify.startWatchdog();
  try {
    const metrics = createMetrics({ version: VERSION });
    const events = new EventBus();
    const paths = createHostPaths(config.root);
    host = deps.host ?? (await createHost(config, { logger, clock, env: deps.env ?? process.env }));
    const hostMachines = host.machines;
    const hostRunner = host.runner;
    const provisioner = createProvisioner({
      paths,
      stateDir: config.stateDir,
      clock,
      logger: logger.child({ component: 'provision' }),
      metrics,
      daemonReload: () => hostMachines.daemonReload(),
      ...(config.host === 'sim' ? { minFreeBytes: 64 * 1024 ** 2 } : {}),
    });
    // Kubernetes: credentials, this node's drain, the Machine watcher. The engine's
    // applied config is read lazily (the wiring exists before the engine, the engine needs it).
    const kubeWiring = createKubeWiring({
      config,
      appliedConfig: () => engine.activeAppliedConfig(),
      refreshNode: () => engine.refreshNode(),
      onStatusChange: statusVersion.bump,
      events,
      logger,
      clock,
      metrics,
      env: deps.env ?? process.env,
    });
    kube = kubeWiring;
    const engine = new Engine({
      paths,
      stateDir: config.stateDir,
      machines: host.machines,
      provisioner,
      clock,
      logger: logger.child({ component: 'engine' }),
      metrics,
      events,
      defaultConfig: host.defaultConfig ?? undefined,
      diagnostics: (m) => captureMachineDiagnostics(hostRunner, m),
      repair: {
        enabled: config.repair,
        // The simulated host answers at once: check and retry in seconds, not minutes.
        ...(config.host === 'sim'
          ? { policy: { checkIntervalMs: 2_000, baseDelayMs: 1_000, maxDelayMs: 8_000 } }
          : {}),
      },
      nodeOps: kubeWiring.nodeOps,
      statusVersion,
      // A getter: credentials appear when the node joins (the applied config carries them), so
      // whether `update --drain` can drain is decided at each update, not once at start.
      get drainer() {
        return kubeWiring.updateDrainer();
      },
    });
    const info = (): DaemonInfo => ({
      version: VERSION,
      pid: process.pid,
      startedAt,
      state: daemonState.get(),
      host: config.host,
      root: config.root,
      shutdownGraceMs: config.shutdownGraceMs,
    });
    let openrpc: Record<string, unknown> | null = null;
    let openapi: Record<string, unknown> | null = null;
    const watcherStatus = (): WatcherStatus | null => kubeWiring.watcherStatus();
    const services: RpcServices = {
      engine,
      daemonInfo: info,
      watcherStatus,
      statusVersion,
      openrpc: () => (openrpc ??= buildOpenRpcDocument(METHOD_LIST, VERSION)),
    };
    const dispatcher = createDispatcher({
      methods: METHOD_LIST,
      services,
      metrics,
      logger: logger.child({ component: 'rpc' }),
      isDraining: () => daemonState.get() === 'draining',
      isReady: () => daemonState.get() === 'ready',
    });
    const readiness = (): Readiness =>
      daemonState.get() === 'ready'
        ? { ready: true, reasons: [] }
        : {
            ready: false,
            reasons: daemonState.get() === 'draining' ? ['shutting down'] : readinessReasons,
          };
    admin = createAdminApp({
      dispatcher,
      events,
      metrics,
      logger,
      readiness,
      openapi: () => (openapi ??= buildOpenApiDocument(VERSION)),
      currentOperationEvents: (filter) => engine.currentOperationEvents(filter),
    });
    await admin.ready();
    await listenUnix(admin.server, config.socket, config.socketMode, gid);
    if (config.metricsAddress) {
      metricsApp = createMetricsApp({ metrics, readiness, logger });
      const { host: mHost, port: mPort } = config.metricsAddress;
      await metricsApp.listen({ host: mHost, port: mPort }).catch((err: NodeJS.ErrnoException) => {
        const why = err.code === 'EADDRINUSE' ? 'the port is already in use' : err.message;
        throw new PreconditionFailedError(`--metrics-address ${mHost}:${mPort}: cannot listen: ${why}`, {
          cause: err,
          data: { option: 'metricsAddress' },
        });
      });
    }
    logger.info(
      {
        socket: config.socket,
        metricsAddress: config.metricsAddress,
        root: config.root,
        host: config.host,
        version: VERSION,
      },
      'agentd serving',
    );

    // Recovery before ready: mutating calls get UNAVAILABLE until the node has one verified machine.
    daemonState.set('recovering');
    const recovery = await engine.start();
    if (recovery) logger.warn({ recovery }, 'startup recovery');
    // After recovery the applied config is known: load the Kubernetes client if credentials may
    // exist, and fail now (exit 2) on a --kubeconfig that cannot be loaded.
    await kubeWiring.validate();
    daemonState.set('ready');
    readinessReasons.length = 0;
    metrics.ready.set(1);
    logger.info('agentd ready');
    // Type=notify: `systemctl start agentd` returns now, with recovery done and the API serving.
    await sdNotify.ready(`serving on ${config.socket}`);
    // A crash mid-update may have left the node cordoned, and recovery ran before Kubernetes
    // was available: take that cordon back now. Never blocks readiness; it logs what it did.
    if (engine.pendingUncordon !== null) {
      void engine
        .completePendingUncordon()
        .catch((err: unknown) => logger.error({ err: describeError(err) }, 'completing a pending uncordon'));
    }
    // The watcher starts only now: its first reconcile may call `update`.
    kubeWiring.start(dispatcher);
    // Repair too: its first check (at once) restarts an active machine found stopped.
    engine.startRepair();

    let resolveStopped!: () => void;
    const stopped = new Promise<void>((r) => (resolveStopped = r));
    let stopping: Promise<void> | null = null;

    /**
     * Shutdown, in this order (DESIGN §9):
     * 1. draining: new mutating calls get DRAINING, so nothing new starts;
     * 2. the watcher stops, so it issues no new calls (an update it waits for is step 3's);
     * 3. in-flight work gets up to --shutdown-grace to reach a safe point (the journal covers the rest);
     * 4. the HTTP servers close (open event streams are ended);
     * 5. the socket and the PID file go last, so `agentctl stop` sees the daemon until it is gone.
     */
    const stop = (reason: string): Promise<void> => {
      stopping ??= (async () => {
        logger.info({ reason, graceMs: config.shutdownGraceMs }, 'agentd shutting down');
        stopWatchdog();
        void sdNotify.stopping(`shutting down (${reason})`);
        daemonState.set('draining');
        metrics.ready.set(0);
        const deadline = clock.now() + config.shutdownGraceMs;
        await kubeWiring.stop().catch((err: unknown) => logger.warn({ err }, 'stopping the Machine watcher'));
        await engine.shutdown(Math.max(0, deadline - clock.now()));
        // The grace is over: closing the admin app cuts requests still open (operations.wait,
        // update with wait) rather than letting them hold the exit; their callers see the
        // connection close.
        await admin?.close().catch((err: unknown) => logger.warn({ err }, 'closing the admin server'));
        await metricsApp
          ?.close()
          .catch((err: unknown) => logger.warn({ err }, 'closing the metrics listener'));
        await host?.close();
        await cleanupFiles();
        logger.info('agentd stopped');
        resolveStopped();
      })();
      return stopping;
    };

    return { config, engine, metrics, dispatcher, info, stopped, stop };
  } catch (err) {
    logger.error({ err: describeError(err) }, 'agentd failed to start');
    stopWatchdog();
    await kube?.stop().catch(() => undefined);
    await admin?.close().catch(() => undefined);
    await metricsApp?.close().catch(() => undefined);
    await host?.close().catch(() => undefined);
    await cleanupFiles();
    throw err;
  }
}
