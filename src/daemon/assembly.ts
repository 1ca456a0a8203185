/**
 * The daemon's assembly, in one function: from the config and a host, the parts of agentd wired
 * together as they serve — the status version and the daemon's state, the metrics and the event
 * bus, the provisioner, the Kubernetes wiring, the engine, the RPC services (the engine's ports),
 * the dispatcher and the admin app. It starts nothing: no listener, no recovery, no watcher, no
 * repair, no I/O; src/daemon/daemon.ts runs the lifecycle on top of it (startup order, the
 * clean-up stack, shutdown), and tests call it to get the parts exactly as the daemon has them.
 *
 * One path for a call: the admin app's `/rpc` route (src/server/rpc-route.ts) → the dispatcher
 * (src/rpc/dispatcher.ts) → a method (src/rpc/methods/) → a port of the engine (src/rpc/ports.ts).
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { DaemonConfig } from '../config/daemon-config.js';
import { Engine } from '../engine/engine.js';
import { EventBus } from '../engine/events.js';
import { FINAL_STATES, OPERATION_KINDS } from '../engine/operation.js';
import { RESERVE_DESCRIPTORS } from '../engine/reserve.js';
import { StatusVersion, type StatusCell } from '../engine/status-version.js';
import type { HealthChecks } from '../fleet/health-checks-schema.js';
import { createHealthGate } from '../fleet/health-gate.js';
import { captureMachineDiagnostics } from '../host/machine-diagnostics.js';
import { runInMachine } from '../host/machines.js';
import { createHostPaths, type HostPaths } from '../host/paths.js';
import type { Clock } from '../host/types.js';
import { createUpstreamDaemonGuard, type UpstreamDaemonGuard } from '../host/upstream-daemon.js';
import { createMetrics, type Metrics } from '../metrics/metrics.js';
import { IN_MACHINE } from '../provision/files/rootfs-layout.js';
import { createProvisioner } from '../provision/provisioner.js';
import type { Provisioner } from '../provision/provisioner-contract.js';
import { createDispatcher, type Dispatcher } from '../rpc/dispatcher.js';
import { METHOD_LIST } from '../rpc/methods/index.js';
import { buildOpenRpcDocument } from '../rpc/openrpc.js';
import type { DrainPort, OperationsPort, StatusReader } from '../rpc/ports.js';
import type { DaemonInfo, DaemonState, RpcServices } from '../rpc/services.js';
import { createAdminApp, type Readiness } from '../server/app.js';
import { buildOpenApiDocument } from '../server/openapi.js';
import { VERSION } from '../version.js';
import type { Host } from './host.js';
import { createKubeWiring, type KubeWiring, type KubeWiringOptions } from './kube-wiring.js';

export interface AssemblyOptions {
  config: DaemonConfig;
  /** How commands run and the machine manager (src/daemon/host-wiring.ts, or a test's). */
  host: Host;
  logger: Logger;
  clock: Clock;
  env: NodeJS.ProcessEnv;
  /** Replace the provisioner (tests with a fake one); default: the real one on `host`. */
  provisioner?: Provisioner;
  /** Replace the metrics (tests: without the process collectors); default: agentd's. */
  metrics?: Metrics;
  /** Descriptors the engine holds back for rollback and recovery (default RESERVE_DESCRIPTORS). */
  reserveDescriptors?: number;
  /** See `DaemonDeps.healthChecks` (daemon.ts). */
  healthChecks?: () => HealthChecks | null;
  /** Watcher and fleet gate timing (tests, the fleet simulation); default: production timing. */
  kube?: Pick<KubeWiringOptions, 'watcher' | 'fleet'>;
}

export interface Assembly {
  /** The version of everything `status` shows (docs/architecture.md, "The status path"). */
  readonly statusVersion: StatusVersion;
  /** starting → recovering → ready → draining; every change bumps the status version. */
  readonly daemonState: StatusCell<DaemonState>;
  readonly metrics: Metrics;
  readonly events: EventBus;
  readonly paths: HostPaths;
  /** The upstream agent's daemon, which the lifecycle takes the node over from. */
  readonly upstreamDaemon: UpstreamDaemonGuard;
  readonly provisioner: Provisioner;
  readonly kube: KubeWiring;
  readonly engine: Engine;
  /** What the RPC methods reach: the engine through its ports, and the daemon's parts. */
  readonly services: RpcServices;
  readonly dispatcher: Dispatcher;
  /** The admin socket's HTTP app (every route); not listening. */
  readonly admin: FastifyInstance;
  info(): DaemonInfo;
  readiness(): Readiness;
  /** Brings the node's gauges up to date before a scrape (as `status` would read it). */
  beforeScrape(): Promise<void>;
}

/** Wire agentd's parts together (see the module comment). Synchronous: it starts nothing. */
export function assembleDaemon(o: AssemblyOptions): Assembly {
  const { config, host, logger, clock, env } = o;
  const startedAt = new Date(clock.now()).toISOString();
  // What `status` shows changes with every input; each bumps this (docs/architecture.md).
  const statusVersion = new StatusVersion();
  const daemonState = statusVersion.cell<DaemonState>('starting');
  const metrics = o.metrics ?? createMetrics({ version: VERSION });
  metrics.zeroOperationSeries(OPERATION_KINDS, FINAL_STATES);
  const events = new EventBus();
  const paths = createHostPaths(config.root);
  // The upstream agent's daemon: the lifecycle stops it before anything else touches the
  // machines, and the provisioner again before every update's provision.
  const upstreamDaemon = createUpstreamDaemonGuard({ runner: host.runner, clock, logger });
  const provisioner =
    o.provisioner ??
    createProvisioner({
      paths,
      stateDir: config.stateDir,
      clock,
      logger: logger.child({ component: 'provision' }),
      metrics,
      daemonReload: () => host.machines.daemonReload(),
      registryAuthFile: config.registryAuthFile,
      transferLimits: config.transferLimits,
      runner: host.runner,
      upstreamDaemon,
      env,
      ...(config.host === 'sim' ? { minFreeBytes: 64 * 1024 ** 2 } : {}),
    });
  // Kubernetes: credentials, this node's drain, the Machine watcher. The engine's applied config
  // is read lazily (the wiring exists before the engine, the engine needs it).
  const kube = createKubeWiring({
    config,
    appliedConfig: () => engine.activeAppliedConfig(),
    // Where this node's own identity (the kubelet's client certificate) is looked for.
    activeKubelet: () => {
      const m = engine.activeAppliedMachine();
      return m === null ? null : { rootfs: paths.machineDir(m), kubeconfig: IN_MACHINE.kubeconfig };
    },
    refreshNode: () => engine.refreshNode(),
    onStatusChange: statusVersion.bump,
    events,
    logger,
    clock,
    metrics,
    env,
    ...o.kube,
  });
  const engine = new Engine({
    paths,
    stateDir: config.stateDir,
    reserveDescriptors: o.reserveDescriptors ?? RESERVE_DESCRIPTORS,
    machines: host.machines,
    switchOrder: config.switchOrder,
    memAvailable: () => host.memAvailable(),
    provisioner,
    clock,
    logger: logger.child({ component: 'engine' }),
    metrics,
    events,
    defaultConfig: host.defaultConfig ?? undefined,
    diagnostics: (m) => captureMachineDiagnostics(host.runner, m),
    healthGate: createHealthGate({
      checks: o.healthChecks ?? (() => kube.healthChecks()),
      node: () => kube.nodeHealth(),
      exec: (m, argv, x) => runInMachine(host.runner, m, argv, x),
      clock,
      logger: logger.child({ component: 'engine' }),
      metrics,
    }),
    // Only a restart that interrupted an operation is a recovery; a first start is starting.
    onRecovering: () => daemonState.set('recovering'),
    repair: {
      enabled: config.repair,
      // The simulated host answers at once: retry a failed repair in seconds, not minutes. It
      // checks as often as a real host (every 30 s): a check reads the whole node, and checking
      // every 2 s was most of an idle try-out daemon's CPU (docs/benchmarks.md, "Footprint").
      ...(config.host === 'sim' ? { policy: { baseDelayMs: 1_000, maxDelayMs: 8_000 } } : {}),
    },
    nodeOps: kube.nodeOps,
    statusVersion,
    // A getter: credentials appear when the node joins (the applied config carries them), so
    // whether `update --drain` can drain is decided at each update, not once at start.
    get drainer() {
      return kube.updateDrainer();
    },
    // Likewise the fleet gate: none without credentials; with them, the policy decides.
    get fleet() {
      return kube.fleetGate();
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
    pidFile: config.pidFile,
    stateDir: config.stateDir,
  });
  // The engine is each port the methods are given (checked here by the compiler).
  const status: StatusReader = engine;
  const operations: OperationsPort = engine;
  const drain: DrainPort = engine;
  let openrpc: Record<string, unknown> | null = null;
  let openapi: Record<string, unknown> | null = null;
  const services: RpcServices = {
    status,
    operations,
    drain,
    daemonInfo: info,
    watcherStatus: () => kube.watcherStatus(),
    fleet: () => kube.fleet(),
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
  const readiness = (): Readiness => {
    const state = daemonState.get();
    if (state === 'ready') return { ready: true, reasons: [] };
    return {
      ready: false,
      reasons: [state === 'draining' ? 'shutting down' : 'startup recovery has not finished'],
    };
  };
  // A scrape shows the node as `status` does: read again when its facts are older than 1 s.
  // The same read sets the gauges the alerts need (src/metrics/status-gauges.ts).
  const beforeScrape = async (): Promise<void> => {
    const s = await engine.status();
    metrics.statusGauges.observe({
      operation: s.operation,
      repair: s.node.repair,
      watcher: kube.watcherStatus(),
    });
  };
  const admin = createAdminApp({
    dispatcher,
    events,
    metrics,
    logger,
    readiness,
    beforeScrape,
    openapi: () => (openapi ??= buildOpenApiDocument(VERSION)),
    currentOperationEvents: (filter) => engine.currentOperationEvents(filter),
  });
  return {
    statusVersion,
    daemonState,
    metrics,
    events,
    paths,
    upstreamDaemon,
    provisioner,
    kube,
    engine,
    services,
    dispatcher,
    admin,
    info,
    readiness,
    beforeScrape,
  };
}
