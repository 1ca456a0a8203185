/**
 * Kubernetes in the daemon, assembled: the session (`src/kube/session.ts`: credentials, the lazy
 * client, this node's cordon/drain/uncordon for the engine) and the watcher supervisor
 * (`src/watcher/supervisor.ts`: the Machine CR watcher's lifecycle), fed by the engine's
 * operation events. Kubernetes being broken (no CRD, a rejected token, an unreachable server)
 * never stops the daemon: it shows in logs, `status.watcher` and the metrics. Only a
 * `--kubeconfig` that cannot be loaded is a start-up error.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { DaemonConfig } from '../config/daemon-config.js';
import type { AgentConfig } from '../config/agent-config.js';
import { createUpdateDrainer } from '../engine/drain-ops.js';
import type { NodeDrainOps } from '../engine/drain-ops.js';
import type { EventBus } from '../engine/events.js';
import { FINAL_STATES } from '../engine/operation.js';
import type { NodeDrainer } from '../engine/update.js';
import type { Clock } from '../host/types.js';
import type { createKubeClients } from '../kube/index.js';
import { createKubeSession, type KubeSessionOptions } from '../kube/session.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Dispatcher } from '../rpc/dispatcher.js';
import type { WatcherStatus } from '../rpc/services.js';
import type { FleetGate } from '../engine/update.js';
import type { NodeHealthSource } from '../fleet/health-gate.js';
import type { HealthChecks } from '../fleet/health-checks-schema.js';
import type * as FleetIndex from '../fleet/index.js';
import type { FleetRuntime, FleetRuntimeOptions } from '../fleet/index.js';
import type { MachineWatcherOptions } from '../watcher/index.js';
import { createWatcherSupervisor } from '../watcher/supervisor.js';
import type { EventRecorder, EventRecorderOptions } from '../kube/event-recorder.js';
import { createResolvingEventSink } from './event-sink-wiring.js';
import { followOperationEvents } from './kube-events.js';
import type { NodeEvent } from './kube-events.js';

/** The fleet gate's code: it loads @kubernetes/client-node, so it is imported with the session's. */
type FleetModule = typeof FleetIndex;

/** How long shutdown waits for queued Kubernetes Events to be written. */
const EVENT_FLUSH_MS = 1000;

export interface KubeWiringOptions {
  config: Pick<
    DaemonConfig,
    'kubeconfig' | 'machineName' | 'watch' | 'crdGroup' | 'host' | 'stateDir' | 'fleet' | 'fleetNamespace'
  >;
  /** The active machine's applied config, unredacted, as last read (`engine.activeAppliedConfig`). */
  appliedConfig: () => AgentConfig | null;
  /** The active machine's rootfs and kubelet kubeconfig: where the node's own identity is looked for (src/kube/session.ts). */
  activeKubelet?: KubeSessionOptions['activeKubelet'];
  /** Re-read the node before deciding whether the watcher can start (`engine.refreshNode`). */
  refreshNode?: () => Promise<void>;
  /** Operation events: when one ends, credentials or the Machine name may exist now (a join). */
  events: EventBus;
  logger: Logger;
  clock: Clock;
  metrics: Metrics;
  env?: NodeJS.ProcessEnv;
  /** Replace the client factory (tests). */
  createClients?: typeof createKubeClients;
  /** Called after every change of what `status` shows of Kubernetes: the cordon, the watcher. */
  onStatusChange?: () => void;
  /** Watcher tuning (tests, benchmarks). */
  watcher?: Pick<MachineWatcherOptions, 'backoff' | 'reconcile' | 'onReconciled'>;
  /** Fleet gate timing (tests, the fleet simulation); the namespace is `config.fleetNamespace`. */
  fleet?: FleetRuntimeOptions['timing'];
  /** Kubernetes Events tuning (tests): the recorder's limits and the fleet wait/hold window. */
  kubeEvents?: Pick<EventRecorderOptions, 'queueSize' | 'burst' | 'refillMs' | 'seriesWindowMs'> & {
    fleetWindowMs?: number;
  };
}

export interface KubeWiring {
  /** This node's cordon/drain/uncordon; each call says why when Kubernetes is not available. */
  readonly nodeOps: NodeDrainOps;
  /** The update's drain seam, or null when there are no credentials (then `drain: true` is refused). */
  updateDrainer(): NodeDrainer | null;
  /** The health gate's view of this node's Node object, or why there is none (no credentials). */
  nodeHealth(): NodeHealthSource;
  /** The update's fleet gate (docs/fleet.md), or null without credentials: no gate. */
  fleetGate(): FleetGate | null;
  /** The fleet policy's health checks of the moment, or null: no policy (or no credentials), no health gate. */
  healthChecks(): HealthChecks | null;
  /** The fleet's status and pause/resume, or why they are not available. */
  fleet(): FleetRuntime['control'] | { unavailable: string };
  /** Throws INVALID_CONFIG when `--kubeconfig` cannot be loaded (called before serving). */
  validate(): Promise<void>;
  /** After ready: start the watcher when it should run; look again whenever an operation ends. */
  start(dispatcher: Pick<Dispatcher, 'handle'>): void;
  watcherStatus(): WatcherStatus;
  /** Stop the watcher (shutdown step 2): it issues no new calls afterwards. */
  stop(): Promise<void>;
}

export function createKubeWiring(o: KubeWiringOptions): KubeWiring {
  const logger = o.logger.child({ component: 'kube' });
  const changed = (): void => o.onStatusChange?.();
  const session = createKubeSession({
    config: o.config,
    appliedConfig: o.appliedConfig,
    activeKubelet: o.activeKubelet,
    logger,
    clock: o.clock,
    env: o.env,
    createClients: o.createClients,
    onCordonChange: changed,
  });
  const supervisor = createWatcherSupervisor({
    config: o.config,
    session,
    registrationConfig: o.appliedConfig,
    refreshNode: o.refreshNode,
    // When an operation ends, credentials or the Machine name may exist now (a join).
    onOperationEnded: (listener) =>
      o.events.subscribe((_seq, event) => {
        if (event.type === 'operation' && FINAL_STATES.has(event.operation.state)) listener();
      }),
    logger,
    clock: o.clock,
    metrics: o.metrics,
    onStatusChange: changed,
    watcher: o.watcher,
  });

  // ---- Kubernetes Events (docs/watcher.md, "Events") ----------------------------------------

  const sinks = createResolvingEventSink({ session, clock: o.clock });
  /** Made with the client code, once Kubernetes is available (no Event can be written before). */
  let recorder: EventRecorder | null = null;
  /** Record on the Machine and on the Node; both are completed (uid, nodeRef) by the sink. */
  const emit = (event: NodeEvent): void => {
    const name = session.machineName();
    const conn = session.current();
    if (name === null || conn === null || stopped) return;
    recorder ??= conn.runtime.createEventRecorder({
      sink: () => sinks.current(),
      instance: () => session.machineName() ?? '',
      clock: o.clock,
      logger,
      onWritten: (result) => o.metrics.kubeEvents.inc({ result }),
      onDropped: (reason) => o.metrics.kubeEventsDropped.inc({ reason }),
      onPending: (pending) => o.metrics.kubeEventsPending.set(pending),
      ...o.kubeEvents,
    });
    recorder.record({ ...event, regarding: sinks.machineRef(name) });
    recorder.record({ ...event, regarding: { apiVersion: 'v1', kind: 'Node', name } });
  };
  const stopEvents = followOperationEvents({
    events: o.events,
    emit,
    clock: o.clock,
    fleetWindowMs: o.kubeEvents?.fleetWindowMs,
  });

  // ---- the fleet gate (docs/fleet.md) -----------------------------------------------------

  let fleetModule: FleetModule | null = null;
  let fleetLoading: Promise<FleetModule> | null = null;
  const loadFleet = (): Promise<FleetModule> =>
    (fleetLoading ??= import('../fleet/index.js').then((m) => (fleetModule = m)));
  let fleetRt: { clients: object; node: string; value: FleetRuntime } | null = null;
  let stopped = false;

  /** The fleet runtime for the credentials and node name of the moment (its policy watch runs). */
  function fleetRuntime(): FleetRuntime | null {
    if (stopped || o.config.fleet === false) return null;
    const conn = session.current();
    if (conn === null) return null;
    if (fleetModule === null) {
      // Credentials came after start (a join): load the gate's code, then start its policy watch.
      void loadFleet()
        .then(() => fleetRuntime())
        .catch((err: unknown) => logger.error({ err: describeError(err) }, 'loading the fleet gate'));
      return null;
    }
    if (fleetRt?.clients !== conn.clients || fleetRt.node !== conn.machineName) {
      const old = fleetRt?.value;
      if (old) void old.stop();
      const value = fleetModule.createFleetRuntime({
        clients: conn.clients,
        namespace: o.config.fleetNamespace,
        node: conn.machineName,
        clock: o.clock,
        logger,
        metrics: o.metrics,
        onChange: changed,
        timing: o.fleet,
      });
      fleetRt = { clients: conn.clients, node: conn.machineName, value };
      value.start();
    }
    return fleetRt.value;
  }

  const unsubscribe = o.events.subscribe((_seq, event) => {
    // A join may have brought credentials: read the fleet policy from then on.
    if (event.type === 'operation' && FINAL_STATES.has(event.operation.state)) fleetRuntime();
  });

  return {
    nodeOps: session.nodeOps,
    updateDrainer: () => (session.unavailableReason() === null ? createUpdateDrainer(session.nodeOps) : null),
    nodeHealth() {
      // A client still loading is not "no credentials": the first read waits for it.
      const why = session.loading() ? null : session.unavailableReason();
      if (why !== null) return { unavailable: why };
      // The Node's name is looked up once per gate (like drain: the Machine's nodeRef, else its name).
      let bound: ReturnType<typeof session.node> | null = null;
      return {
        async read() {
          bound ??= session.node();
          try {
            const { runtime, clients, node } = await bound;
            return await runtime.getNodeHealth(clients.core, node);
          } catch (err) {
            bound = null;
            throw err;
          }
        },
      };
    },
    fleetGate: () => fleetRuntime()?.gate ?? null,
    healthChecks: () => fleetRuntime()?.policy.current()?.healthChecks ?? null,
    fleet() {
      const rt = fleetRuntime();
      if (rt !== null) return rt.control;
      if (o.config.fleet === false)
        return { unavailable: 'this node does not take part in the fleet gate (--no-fleet)' };
      return { unavailable: session.unavailableReason() ?? 'the Kubernetes client is not loaded' };
    },
    async validate() {
      await session.validate();
      // Before ready, so the first update finds the gate's code (and so its policy) loaded.
      if (session.mightHaveCredentials()) await loadFleet();
    },
    start(dispatcher) {
      supervisor.start(dispatcher);
      // Read the fleet policy from the start, so the first update finds it known.
      fleetRuntime();
    },
    watcherStatus: () => supervisor.status(),
    async stop() {
      stopped = true;
      unsubscribe();
      stopEvents();
      // The last Events (how the final operation ended) get a moment to be written, no more.
      const r = recorder;
      if (r !== null) {
        const flushed = new AbortController();
        await Promise.race([r.idle(), o.clock.sleep(EVENT_FLUSH_MS, flushed.signal).catch(() => undefined)]);
        flushed.abort();
        r.stop();
      }
      await supervisor.stop();
      await fleetRt?.value.stop();
    },
  };
}
