/**
 * The per-call RPC metrics, `agentd_rpc_requests_total{method,code}` and
 * `agentd_rpc_request_duration_seconds{method}`, with a hot path of plain increments.
 *
 * prom-client's Counter and Histogram validate and hash the label set on every `inc` and
 * `observe`, even through a bound child: measured on 2 cores, that was ~3 µs of a cached
 * `status` call, a sixth of its whole cost. Here each method has a tally (a count per code,
 * bucket counts, sum) that a call bumps, and the tallies are turned into metric values when the
 * registry is read. Both metrics are registered in the prom-client Registry, which renders them
 * like its own (it asks a metric only for name, help, type, aggregator and `get()`).
 */
import type { Registry } from 'prom-client';

/** One exported sample, in the shape prom-client's metrics return from `get()`. */
export interface MetricSample {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

/** What `get()` returns: prom-client's metric snapshot shape. */
export interface MetricSnapshot {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: MetricSample[];
}

/** The calls of one `method` label. */
export class MethodTally {
  /** Calls by result code (`ok` or the error code), in first-seen order. */
  readonly codes = new Map<string, number>();
  /** Observations per bucket (not cumulative); the last slot is above the largest bound. */
  readonly buckets: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly method: string,
    private readonly bounds: readonly number[],
  ) {
    this.buckets = new Float64Array(bounds.length + 1);
  }

  /** Count one call that ended with `code` after `seconds`. */
  record(code: string, seconds: number): void {
    this.codes.set(code, (this.codes.get(code) ?? 0) + 1);
    let i = 0;
    // Prometheus buckets are "less than or equal": a value on a bound belongs to it.
    for (const bound of this.bounds) {
      if (seconds <= bound) break;
      i++;
    }
    this.buckets[i] = (this.buckets[i] ?? 0) + 1;
    this.sum += seconds;
    this.count++;
  }
}

/** A metric the registry can render: what prom-client reads of its own metrics. */
interface RegistryMetric {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly aggregator: 'sum';
  get(): Promise<MetricSnapshot>;
  reset(): void;
}

export class RpcCallMetrics {
  readonly #tallies = new Map<string, MethodTally>();
  readonly requests: RegistryMetric;
  readonly duration: RegistryMetric;

  constructor(
    registry: Registry,
    private readonly bounds: readonly number[],
  ) {
    const tallies = (): MethodTally[] => [...this.#tallies.values()];
    const reset = (): void => this.#tallies.clear();
    this.requests = {
      name: 'agentd_rpc_requests_total',
      help: 'JSON-RPC calls by method and result code (ok, or the error code).',
      type: 'counter',
      aggregator: 'sum',
      reset,
      get: async () => ({
        ...pick(this.requests),
        values: tallies().flatMap((t) =>
          [...t.codes].map(([code, n]) => ({ value: n, labels: { method: t.method, code } })),
        ),
      }),
    };
    this.duration = {
      name: 'agentd_rpc_request_duration_seconds',
      help: 'JSON-RPC call latency by method.',
      type: 'histogram',
      aggregator: 'sum',
      reset,
      get: async () => ({
        ...pick(this.duration),
        values: tallies().flatMap((t) => this.#histogramSamples(t)),
      }),
    };
    // The registry's type names only prom-client's own classes; it reads nothing beyond
    // RegistryMetric of them (registry.js: name, help, type, aggregator, get, reset).
    for (const metric of [this.requests, this.duration]) {
      registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
    }
  }

  /** The tally of one `method` label: look it up once and call `record` on it per call. */
  method(method: string): MethodTally {
    let tally = this.#tallies.get(method);
    if (!tally) this.#tallies.set(method, (tally = new MethodTally(method, this.bounds)));
    return tally;
  }

  /** Cumulative buckets, +Inf, _sum and _count, in prom-client's order. */
  #histogramSamples(t: MethodTally): MetricSample[] {
    const bucket = `${this.duration.name}_bucket`;
    const samples: MetricSample[] = [];
    let cumulative = 0;
    this.bounds.forEach((le, i) => {
      cumulative += t.buckets[i] ?? 0;
      samples.push({ value: cumulative, labels: { le, method: t.method }, metricName: bucket });
    });
    samples.push(
      { value: t.count, labels: { le: '+Inf', method: t.method }, metricName: bucket },
      { value: t.sum, labels: { method: t.method }, metricName: `${this.duration.name}_sum` },
      { value: t.count, labels: { method: t.method }, metricName: `${this.duration.name}_count` },
    );
    return samples;
  }
}

function pick(m: RegistryMetric): Omit<MetricSnapshot, 'values'> {
  return { name: m.name, help: m.help, type: m.type, aggregator: m.aggregator };
}
