/**
 * The daemon's lifecycle: startup in dependency order, and the one shutdown whose order
 * docs/architecture.md ("Lifecycle") fixes. Every part startup brings up pushes the step that
 * takes it down onto one clean-up stack, which both a failed start and a stop unwind, so the
 * two paths cannot drift apart. Collaborators come in through options with production defaults.
 * The parts themselves are wired by one function, `assembleDaemon` (assembly.ts), which tests
 * call too; this file runs them.
 */
import { rmdir } from 'node:fs/promises';
import { describeProxy } from '../config/proxy.js';
import { useOutboundProxy } from '../outbound-http.js';
import type { Logger } from 'pino';
import type { DaemonConfig } from '../config/daemon-config.js';
import type { Engine } from '../engine/engine.js';
import type { InFlight } from '../engine/operation-slot.js';
import { PreconditionFailedError, describeError } from '../errors.js';
import { systemClock } from '../host/clock.js';
import type { HealthChecks } from '../fleet/health-checks-schema.js';
import {
  foreignPidFileError,
  inspectPidFile,
  removePidFile,
  removePidFileSync,
  writePidFile,
} from '../host/pid-file.js';
import type { Clock } from '../host/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Dispatcher } from '../rpc/dispatcher.js';
import type { DaemonInfo } from '../rpc/services.js';
import { VERSION } from '../version.js';
import { createMetricsApp } from '../server/app.js';
import { createSdNotifier } from './sd-notify.js';
import { createHost, type Host } from './host-wiring.js';
import type { KubeWiringOptions } from './kube-wiring.js';
import { assembleDaemon } from './assembly.js';
import { CleanupStack } from './cleanup-stack.js';
import { acquireInstanceLock } from '../host/instance-lock.js';
import { checkStateDirWritable, markOrWarn, prepareStateDir, removeCreatedStateDir } from './state-dir.js';
import {
  listenUnix,
  prepareSocketPath,
  removeOwnSocket,
  removeOwnSocketSync,
  resolveGroup,
  socketIdentity,
} from '../server/socket.js';
import type { SocketIdentity } from '../server/socket.js';

export interface DaemonDeps {
  logger: Logger;
  clock?: Clock;
  /** Replace the host wiring (tests). */
  host?: Host;
  env?: NodeJS.ProcessEnv;
  /**
   * Aborted by a SIGTERM/SIGINT that arrives while the daemon starts (the signal handlers are
   * installed before startup): startup skips what is left, recovery included, and the returned
   * daemon is already stopping.
   */
  stopRequested?: AbortSignal;
  /**
   * Replace the fleet policy's `healthChecks` of the moment (docs/fleet.md; default: the policy
   * the fleet gate watches). Null (no fleet policy) skips the health gate, and an update commits
   * once verify passed.
   */
  healthChecks?: () => HealthChecks | null;
  /** Watcher and fleet gate timing (tests, the fleet simulation); default: production timing. */
  kube?: Pick<KubeWiringOptions, 'watcher' | 'fleet'>;
  /**
   * End the process with this code at once (default `process.exit`): when the shutdown grace is
   * over and an operation still runs, nothing of it may run on without the instance lock.
   */
  exit?: (code: number) => void;
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
  const cleanup = new CleanupStack(logger);
  let createdDirs: string[] = [];
  try {
    // 1. The instance lock first: one agentd per PID file, socket and state dir. Two
    //    simultaneous starts cannot both pass it, and it goes with the process however it ends,
    //    so it is never stale. Then the state dir must be writable (exit 2 naming it).
    //    A start that fails takes back the state dir it created (once empty but for the marker).
    const prepared = await prepareStateDir(config.stateDir);
    createdDirs = prepared.created;
    const stateDir = prepared.real;
    const lock = await acquireInstanceLock({ pidFile: config.pidFile, socket: config.socket, stateDir });
    cleanup.push('release the instance lock', () => lock.release());
    await checkStateDirWritable(config.stateDir);
    await markOrWarn(config.stateDir, createdDirs.length > 0, logger);
    // 2. The PID file: a live agentd in it (one started without the lock, by an older
    //    version) still refuses the start; a stale one is replaced.
    const pidState = await inspectPidFile(config.pidFile);
    if (pidState.kind === 'agentd' && pidState.pid !== process.pid) {
      throw new PreconditionFailedError(
        `agentd is already running as pid ${pidState.pid} (PID file ${config.pidFile}); stop it first with agentctl stop`,
      );
    }
    // Only a PID file is replaced: a file with anything else in it is not agentd's (exit 2).
    if (pidState.kind === 'garbage') throw foreignPidFileError(config.pidFile, pidState.content);
    if (pidState.kind === 'dead' || pidState.kind === 'foreign') {
      logger.warn({ pidFile: config.pidFile, found: pidState }, 'replacing a stale PID file');
    }
    // 3. The socket path: refuse a live daemon, and an unknown group, before writing anything
    //    of ours (prepareSocketPath may create the socket's directory).
    const gid = config.socketGroup === null ? null : await resolveGroup(config.socketGroup);
    const socketDir = await prepareSocketPath(config.socket);
    // A directory agentd made for its socket goes again when it stops or fails to start (once
    // empty: rmdir never removes what someone else put there).
    if (socketDir !== null) {
      cleanup.push('remove the socket directory agentd created', () =>
        rmdir(socketDir).catch(() => undefined),
      );
    }
    await writePidFile(config.pidFile, process.pid, pidState.kind === 'absent' ? 'create' : 'replace');
    // Last out: `agentctl stop` sees the daemon until it is gone.
    cleanup.push('remove the PID file', () => removePidFile(config.pidFile, process.pid));
    return await startServing(config, deps, cleanup, gid);
  } catch (err) {
    logger.error({ err: describeError(err) }, 'agentd failed to start');
    await cleanup.unwind();
    await removeCreatedStateDir(createdDirs);
    throw err;
  }
}

/** Steps 4 on: host, HTTP, recovery, ready; every part pushes its clean-up onto `cleanup`. */
async function startServing(
  config: DaemonConfig,
  deps: DaemonDeps,
  cleanup: CleanupStack,
  gid: number | null,
): Promise<Daemon> {
  const { logger } = deps;
  const clock = deps.clock ?? systemClock;
  const env = deps.env ?? process.env;
  // Type=notify readiness and the watchdog (sd-notify.ts); a no-op outside systemd. The
  // watchdog runs from here on, so a recovery that wedges is restarted by systemd too.
  const sdNotify = createSdNotifier({ env, logger, clock });
  cleanup.push('stop the watchdog', sdNotify.startWatchdog());
  // Downloads, image pulls and health checks go through the proxy of HTTPS_PROXY & co. (before any request).
  useOutboundProxy(config.proxy);
  const proxy = describeProxy(config.proxy);
  if (proxy)
    logger.info({ proxy }, 'outbound HTTP goes through a proxy; loopback and NO_PROXY hosts directly');
  // Set once this process has bound the socket: only that socket is ever removed, never a path
  // another process owns now. Pushed first, so it runs just before the PID file goes.
  let ownSocket: SocketIdentity | null = null;
  cleanup.push('remove the socket', async () => {
    if (ownSocket !== null) await removeOwnSocket(config.socket, ownSocket);
  });
  const host = deps.host ?? (await createHost(config, { logger, clock, env, cleanup }));
  cleanup.push('close the host wiring', () => host.close());
  // Every part, wired as it serves (assembly.ts); nothing of it has started yet.
  const a = assembleDaemon({
    config,
    host,
    logger,
    clock,
    env,
    healthChecks: deps.healthChecks,
    kube: deps.kube,
  });
  const { engine, metrics, dispatcher, admin, daemonState, info } = a;
  // Closed explicitly (never left to the garbage collector): the last thing the engine holds.
  cleanup.push('close the descriptor reserve', () => engine.reserve.close());
  // The upstream agent's daemon is stopped before anything else touches the machines.
  await a.upstreamDaemon.takeOver().catch((err: unknown) => {
    logger.error(
      { err: describeError(err) },
      'could not take the node over from the upstream agent’s daemon',
    );
  });
  await admin.ready();
  await listenUnix(admin.server, config.socket, config.socketMode, gid);
  ownSocket = await socketIdentity(config.socket);
  // The grace is over when this runs: closing cuts requests still open (operations.wait,
  // update with wait) rather than letting them hold the exit; their callers see the close.
  cleanup.push('close the admin server', () => admin.close());
  if (config.metricsAddress) {
    const metricsApp = createMetricsApp({
      metrics,
      readiness: a.readiness,
      logger,
      beforeScrape: a.beforeScrape,
    });
    const { host: mHost, port: mPort } = config.metricsAddress;
    await metricsApp.listen({ host: mHost, port: mPort }).catch(async (err: NodeJS.ErrnoException) => {
      await metricsApp.close().catch(() => undefined);
      const why = err.code === 'EADDRINUSE' ? 'the port is already in use' : err.message;
      throw new PreconditionFailedError(`--metrics-address ${mHost}:${mPort}: cannot listen: ${why}`, {
        cause: err,
        data: { option: 'metricsAddress' },
      });
    });
    cleanup.push('close the metrics listener', () => metricsApp.close());
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
  // In-flight work gets up to --shutdown-grace to reach a safe point (the journal covers the
  // rest); pushed before the watcher's step, so it runs after the watcher has stopped.
  let graceDeadline = Number.POSITIVE_INFINITY;
  cleanup.push('let in-flight work reach a safe point', async () => {
    const left = await engine.shutdown(
      Math.max(0, Math.min(config.shutdownGraceMs, graceDeadline - clock.now())),
    );
    if (left !== null) exitWithWorkInFlight(left);
  });
  /**
   * The grace is over and work still runs in this process. The rest of the stack must not run:
   * it would release the instance lock and the PID file while this process still drives the
   * machines, and a second agentd could start beside it. So the process ends here, at once: the
   * socket and the PID file are removed synchronously and the exit follows in the same step, so
   * nothing of the operation runs after them; the instance lock goes with the process. The
   * journal lets the next start's recovery complete the operation (docs/operations.md, "Signals").
   */
  const exitWithWorkInFlight = ({ operation: op }: InFlight): void => {
    try {
      const phase = op?.phases.find((p) => p.state === 'running')?.name ?? null;
      logger.error(
        { operation: op?.id ?? null, kind: op?.kind ?? null, phase, graceMs: config.shutdownGraceMs },
        op
          ? `shutdown grace over: operation ${op.id} (${op.kind}) still runs${phase ? ` in phase ${phase}` : ''}; exiting now without finishing it — the next start of agentd recovers it`
          : 'shutdown grace over: a request was still being admitted (no operation had started); exiting now',
      );
      if (ownSocket !== null) removeOwnSocketSync(config.socket, ownSocket);
      removePidFileSync(config.pidFile, process.pid);
    } finally {
      // Whatever failed above, the exit comes: never an unwinding that releases the lock.
      (deps.exit ?? ((code: number) => process.exit(code)))(1);
    }
  };
  cleanup.push('stop the Machine watcher', () => a.kube.stop());

  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => (resolveStopped = r));
  let stopping: Promise<void> | null = null;

  /**
   * Shutdown (docs/architecture.md, "Lifecycle"): draining first, so nothing new starts; then
   * the clean-up stack in reverse order of startup: the watcher stops (no new calls), in-flight
   * work gets the grace, the HTTP servers close, the host wiring closes, and the socket and the
   * PID file go last, so `agentctl stop` sees the daemon until it is gone.
   */
  const stop = (reason: string): Promise<void> => {
    stopping ??= (async () => {
      logger.info({ reason, graceMs: config.shutdownGraceMs }, 'agentd shutting down');
      void sdNotify.stopping(`shutting down (${reason})`);
      daemonState.set('draining');
      metrics.ready.set(0);
      graceDeadline = clock.now() + config.shutdownGraceMs;
      await cleanup.unwind();
      logger.info('agentd stopped');
      resolveStopped();
    })();
    return stopping;
  };
  const daemon: Daemon = { config, engine, metrics, dispatcher, info, stopped, stop };
  const stopRequested = deps.stopRequested;
  const requestedStop = (): Daemon => {
    logger.warn({ reason: String(stopRequested?.reason) }, 'stop requested while starting');
    void stop(String(stopRequested?.reason ?? 'stop requested'));
    return daemon;
  };
  if (stopRequested?.aborted) return requestedStop();

  // Recovery before ready: mutating calls get UNAVAILABLE until the node has one verified machine.
  const recovery = await engine.start();
  if (recovery) logger.warn({ recovery }, 'startup recovery');
  // A signal during recovery waited for it (the node is at one verified machine now); stop.
  if (stopRequested?.aborted) return requestedStop();
  // After recovery the applied config is known: load the Kubernetes client if credentials may
  // exist, and fail now (exit 2) on a --kubeconfig that cannot be loaded.
  await a.kube.validate();
  daemonState.set('ready');
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
  a.kube.start(dispatcher);
  // Repair too: its first check (at once) restarts an active machine found stopped.
  engine.startRepair();
  return daemon;
}
