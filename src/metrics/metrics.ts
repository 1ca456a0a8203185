/**
 * Every Prometheus metric agentd exports, declared once. Parts receive the `Metrics` object
 * through their options; `docs/metrics.md` lists these names (a test keeps them in step).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { EVENT_LOOP_DELAY_METRICS, registerEventLoopDelay } from './event-loop.js';
import { registerStatusGauges } from './status-gauges.js';

/** The period of prom-client's own delay monitor, which nothing reads (see createMetrics): the longest a timer takes. */
const IDLE_MONITOR_PERIOD_MS = 2 ** 31 - 1;

const DURATION_BUCKETS = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200];
const RPC_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30];

/**
 * prom-client's defaults that break the exposition format's naming rules: gauges whose names end
 * in `_total`, which `promtool check metrics` rejects. Their values are still exported, per
 * type, by the correctly named `nodejs_active_handles`, `nodejs_active_requests` and
 * `nodejs_active_resources` gauges that the same defaults register.
 */
export const MISNAMED_DEFAULT_METRICS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
] as const;

/** The kubelet states `agentd_machine_kubelet_state` reports, one series each. */
export const KUBELET_STATES = ['active', 'inactive', 'failed', 'unknown'] as const;

export function createMetrics(options: { version: string; collectDefaults?: boolean }) {
  const registry = new Registry();
  // prom-client samples event-loop delay with a libuv timer every `eventLoopMonitoringPrecision`
  // ms, from start to exit: even once a second, that was about half of an idle agentd's CPU
  // (docs/benchmarks.md, "Footprint"). Its monitor is given a period of ~24 days instead and its
  // nodejs_eventloop_lag_{min…p99}_seconds are replaced by the same family sampled only while
  // /metrics is scraped (event-loop.ts); nodejs_eventloop_lag_seconds is measured at each scrape.
  if (options.collectDefaults !== false) {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: IDLE_MONITOR_PERIOD_MS });
    for (const name of MISNAMED_DEFAULT_METRICS) registry.removeSingleMetric(name);
    for (const [name] of Object.values(EVENT_LOOP_DELAY_METRICS)) registry.removeSingleMetric(name);
    registerEventLoopDelay(registry);
  }
  const r = [registry];
  /** Whether the fleet policy's maintenance windows let an update through now: no policy, yes. */
  let fleetWindowOpenNow: () => boolean = () => true;
  const metrics = {
    registry,
    buildInfo: new Gauge({
      name: 'agentd_build_info',
      help: 'Build information; always 1.',
      labelNames: ['version', 'node_version'],
      registers: r,
    }),
    ready: new Gauge({
      name: 'agentd_ready',
      help: '1 once startup recovery is done and the daemon serves.',
      registers: r,
    }),
    rpcRequests: new Counter({
      name: 'agentd_rpc_requests_total',
      help: 'JSON-RPC calls by method and result code (ok, or the error code).',
      labelNames: ['method', 'code'],
      registers: r,
    }),
    rpcDuration: new Histogram({
      name: 'agentd_rpc_request_duration_seconds',
      help: 'JSON-RPC call latency by method.',
      labelNames: ['method'],
      buckets: RPC_BUCKETS,
      registers: r,
    }),
    httpConnections: new Gauge({
      name: 'agentd_http_connections',
      help: 'Open HTTP connections by listener (socket: the admin socket; metrics: the TCP metrics listener).',
      labelNames: ['listener'],
      registers: r,
    }),
    httpConnectionsClosed: new Counter({
      name: 'agentd_http_connections_closed_total',
      help: 'HTTP connections agentd closed to bound its clients, by listener and reason (evicted, refused, reserve_only, slow_reader).',
      labelNames: ['listener', 'reason'],
      registers: r,
    }),
    operations: new Counter({
      name: 'agentd_operations_total',
      help: 'Finished operations by kind and result state.',
      labelNames: ['kind', 'result'],
      registers: r,
    }),
    operationDuration: new Histogram({
      name: 'agentd_operation_duration_seconds',
      help: 'Operation wall time by kind and result state.',
      labelNames: ['kind', 'result'],
      buckets: DURATION_BUCKETS,
      registers: r,
    }),
    phaseDuration: new Histogram({
      name: 'agentd_phase_duration_seconds',
      help: 'Update phase wall time by phase and result.',
      labelNames: ['phase', 'result'],
      buckets: DURATION_BUCKETS,
      registers: r,
    }),
    taskDuration: new Histogram({
      name: 'agentd_task_duration_seconds',
      help: 'Task runner task wall time by task name and result.',
      labelNames: ['task', 'result'],
      buckets: DURATION_BUCKETS,
      registers: r,
    }),
    downWindow: new Histogram({
      name: 'agentd_down_window_seconds',
      help: 'Time the node did not serve during a switch-over: source stop begins until the target is verified.',
      buckets: DURATION_BUCKETS,
      registers: r,
    }),
    activeMachine: new Gauge({
      name: 'agentd_active_machine',
      help: '1 for the active machine (kube1 or kube2), 0 for the other.',
      labelNames: ['machine'],
      registers: r,
    }),
    nodeServing: new Gauge({
      name: 'agentd_node_serving',
      help: '1 when the active machine runs and its kubelet is active and healthy, else 0.',
      registers: r,
    }),
    nodeObserved: new Gauge({
      name: 'agentd_node_observed_timestamp_seconds',
      help: 'Unix time at which the read of the node behind the node gauges started.',
      registers: r,
    }),
    kubeletState: new Gauge({
      name: 'agentd_machine_kubelet_state',
      help: 'The kubelet state of each machine: 1 for its current state, 0 for the others.',
      labelNames: ['machine', 'state'],
      registers: r,
    }),
    appliedInfo: new Gauge({
      name: 'agentd_applied_config_info',
      help: 'The applied configuration of the active machine; always 1.',
      labelNames: ['machine', 'kubernetes_version', 'image', 'hash'],
      registers: r,
    }),
    lastSuccess: new Gauge({
      name: 'agentd_last_success_timestamp_seconds',
      help: 'Unix time of the last successful operation by kind.',
      labelNames: ['kind'],
      registers: r,
    }),
    downloadBytes: new Counter({
      name: 'agentd_download_bytes_total',
      help: 'Bytes downloaded (artifacts and image blobs).',
      labelNames: ['kind'],
      registers: r,
    }),
    downloadCacheHits: new Counter({
      name: 'agentd_download_cache_hits_total',
      help: 'Downloads served from the content-addressed cache.',
      labelNames: ['kind'],
      registers: r,
    }),
    downloadRetries: new Counter({
      name: 'agentd_download_retries_total',
      help: 'Download attempts retried after a 5xx or connection error.',
      labelNames: ['kind'],
      registers: r,
    }),
    watchEvents: new Counter({
      name: 'agentd_watch_events_total',
      help: 'Machine CR watch events received by type.',
      labelNames: ['type'],
      registers: r,
    }),
    fleetSlotWait: new Histogram({
      name: 'agentd_fleet_slot_wait_seconds',
      help: 'Time an update waited in the fleet gate (slot phase) until it held a slot, by result (acquired, cancelled, failed).',
      labelNames: ['result'],
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600],
      registers: r,
    }),
    fleetGateDecisions: new Counter({
      name: 'agentd_fleet_gate_decisions_total',
      help: 'Fleet gate decisions by result (acquired, wait) and reason (Acquired, WaitingForSlot, OutsideWindow, Paused, Halted).',
      labelNames: ['result', 'reason'],
      registers: r,
    }),
    fleetWindowOpen: new Gauge({
      name: 'agentd_fleet_window_open',
      help: '1 when a maintenance window of the fleet policy is open now (or the policy has none, or there is no policy), else 0.',
      registers: r,
      // Read at each scrape: windows open and close with the clock, not with any event of ours.
      collect() {
        this.set(fleetWindowOpenNow() ? 1 : 0);
      },
    }),
    fleetPaused: new Gauge({
      name: 'agentd_fleet_paused',
      help: '1 when the fleet policy says paused: true.',
      registers: r,
    }),
    fleetHalted: new Gauge({
      name: 'agentd_fleet_halted',
      help: '1 when the recorded failures reached maxFailures: no agent takes a slot until `agentctl fleet resume`.',
      registers: r,
    }),
    fleetPolicyErrors: new Counter({
      name: 'agentd_fleet_policy_errors_total',
      help: 'Fleet policies read from the agentd-fleet ConfigMap that did not validate (the last good one holds).',
      registers: r,
    }),
    fleetSlotLost: new Counter({
      name: 'agentd_fleet_slot_lost_total',
      help: 'Slots this agent held and found taken by another holder (or could not renew before the lease expired).',
      registers: r,
    }),
    watchRestarts: new Counter({
      name: 'agentd_watch_restarts_total',
      help: 'Machine CR watch restarts by reason (error, gone, closed).',
      labelNames: ['reason'],
      registers: r,
    }),
    watchDecodeErrors: new Counter({
      name: 'agentd_watch_decode_errors_total',
      help: 'Watch events that could not be decoded as a Machine.',
      registers: r,
    }),
    reconciles: new Counter({
      name: 'agentd_reconcile_total',
      help: 'Machine reconciles by result (success, error, requeue).',
      labelNames: ['result'],
      registers: r,
    }),
    kubeEvents: new Counter({
      name: 'agentd_kube_events_total',
      help: 'Kubernetes Event writes by result (created, series_updated, failed).',
      labelNames: ['result'],
      registers: r,
    }),
    kubeEventsDropped: new Counter({
      name: 'agentd_kube_events_dropped_total',
      help: 'Kubernetes Events not written, by reason (queue_full, rate_limited).',
      labelNames: ['reason'],
      registers: r,
    }),
    kubeEventsPending: new Gauge({
      name: 'agentd_kube_events_pending',
      help: 'Kubernetes Events queued or being written.',
      registers: r,
    }),
    reconcileTime: new Histogram({
      name: 'agentd_reconcile_time_seconds',
      help: 'Machine reconcile wall time.',
      buckets: DURATION_BUCKETS,
      registers: r,
    }),
    healthGateChecks: new Counter({
      name: 'agentd_health_gate_checks_total',
      help: 'Health gate check results after verify, by check (node-ready or the check name) and result (pass, fail).',
      labelNames: ['check', 'result'],
      registers: r,
    }),
    /** `agentd_operation_phase_start_timestamp_seconds`, `agentd_watcher_state`, `agentd_repair_state`: set from `status` before a scrape. */
    statusGauges: registerStatusGauges(registry),
    /**
     * Export `agentd_operations_total` at 0 for every kind and final state before the first
     * operation ends: a series that first appears at 1 is no increase to `increase()`, and the
     * first failure after a start would not fire the alert (deploy/prometheus/agentd.rules.yaml).
     */
    zeroOperationSeries(kinds: readonly string[], results: Iterable<string>): void {
      for (const result of results) for (const kind of kinds) metrics.operations.inc({ kind, result }, 0);
    },
    /** Where `agentd_fleet_window_open` is read from at each scrape: the fleet policy watch. */
    setFleetWindowSource(source: () => boolean): void {
      fleetWindowOpenNow = source;
    },
  };
  metrics.buildInfo.set({ version: options.version, node_version: process.version }, 1);
  return metrics;
}

export type Metrics = ReturnType<typeof createMetrics>;
