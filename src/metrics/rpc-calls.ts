/**
 * `agentd_rpc_requests_total{method,code}` and `agentd_rpc_request_duration_seconds{method}`:
 * a prom-client Counter and Histogram whose values are tallied per method on the hot path and
 * read when the registry is scraped.
 *
 * prom-client validates and hashes the label set on every `inc` and `observe`, even through a
 * bound child: ~3 µs per call for the two, against ~0.1 µs for a tally (measured; see
 * docs/benchmarks.md), on a `status` poll whose whole server cost is ~17 µs. So a call bumps its
 * method's tally; the counter turns the tallies into values in prom-client's `collect` hook, and
 * the histogram renders them in its `get`.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

type HistogramSnapshot = Awaited<ReturnType<Histogram<'method'>['get']>>;
type HistogramSample = HistogramSnapshot['values'][number];

/** The calls of one `method` label. */
export class MethodTally {
  /** Calls by result code (`ok` or the error code). */
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
    while (i < this.bounds.length && seconds > (this.bounds[i] ?? Infinity)) i++;
    this.buckets[i] = (this.buckets[i] ?? 0) + 1;
    this.sum += seconds;
    this.count++;
  }
}

/** A Histogram rendered from the tallies; durations are recorded through `RpcCallMetrics`. */
class TalliedHistogram extends Histogram<'method'> {
  // Plain fields, not #private: prom-client's constructor calls reset() before they are set.
  private readonly tallies: () => MethodTally[];
  private readonly bounds: readonly number[];
  private readonly onReset: (() => void) | undefined;

  constructor(
    registry: Registry,
    bounds: readonly number[],
    tallies: () => MethodTally[],
    onReset: () => void,
  ) {
    super({
      name: 'agentd_rpc_request_duration_seconds',
      help: 'JSON-RPC call latency by method.',
      labelNames: ['method'],
      buckets: [...bounds],
      registers: [registry],
    });
    this.tallies = tallies;
    this.bounds = bounds;
    this.onReset = onReset;
  }

  /** Not used: a call is recorded once, in its method's tally (`RpcCallMetrics.method`). */
  override observe(): never {
    throw new Error('agentd_rpc_request_duration_seconds is recorded through RpcCallMetrics.method()');
  }

  override reset(): void {
    super.reset();
    this.onReset?.();
  }

  /**
   * prom-client's registry renders a metric through this method when it has one, else through
   * `get()` (lib/registry.js); both render the tallies. The test renders the same calls through
   * prom-client's own Histogram and compares the text, so a change there shows.
   */
  getForPromString(): Promise<HistogramSnapshot> {
    return this.get();
  }

  /** Cumulative buckets, +Inf, _sum and _count per method, as prom-client's own histogram. */
  override async get(): Promise<HistogramSnapshot> {
    const name = 'agentd_rpc_request_duration_seconds';
    const values: HistogramSample[] = [];
    for (const t of this.tallies()) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += t.buckets[i] ?? 0;
        const labels: Record<string, string | number> = { le, method: t.method };
        values.push({ value: cumulative, labels, metricName: `${name}_bucket` });
      });
      const inf: Record<string, string | number> = { le: '+Inf', method: t.method };
      values.push(
        { value: t.count, labels: inf, metricName: `${name}_bucket` },
        { value: t.sum, labels: { method: t.method }, metricName: `${name}_sum` },
        { value: t.count, labels: { method: t.method }, metricName: `${name}_count` },
      );
    }
    // prom-client types `type` as an enum its JavaScript does not export (the value is this
    // string), and the snapshot with the metric's `collect`, which the registry does not read.
    const type = 'histogram' as unknown as HistogramSnapshot['type'];
    const help = 'JSON-RPC call latency by method.';
    return { name, help, type, values, aggregator: 'sum', collect: () => undefined };
  }
}

export class RpcCallMetrics {
  readonly #tallies = new Map<string, MethodTally>();
  readonly requests: Counter<'method' | 'code'>;
  readonly duration: Histogram<'method'>;

  constructor(
    registry: Registry,
    private readonly bounds: readonly number[],
  ) {
    const tallies = (): MethodTally[] => [...this.#tallies.values()];
    this.requests = new Counter({
      name: 'agentd_rpc_requests_total',
      help: 'JSON-RPC calls by method and result code (ok, or the error code).',
      labelNames: ['method', 'code'],
      registers: [registry],
      // prom-client calls this on every scrape: the counter's values are the tallies'.
      collect() {
        this.reset();
        for (const t of tallies()) {
          for (const [code, n] of t.codes) this.inc({ method: t.method, code }, n);
        }
      },
    });
    this.duration = new TalliedHistogram(registry, bounds, tallies, () => this.#tallies.clear());
  }

  /** The tally of one `method` label: look it up, then `record` each call on it. */
  method(method: string): MethodTally {
    let tally = this.#tallies.get(method);
    if (!tally) this.#tallies.set(method, (tally = new MethodTally(method, this.bounds)));
    return tally;
  }
}
