/** Drive an HTTP endpoint on a unix socket with autocannon and keep the numbers the benches print. */
import autocannon from 'autocannon';

export interface LoadResult {
  /** Mean requests per second over the run. */
  rps: number;
  /**
   * Latency percentiles in milliseconds, from every response's own time (autocannon's histogram
   * has whole-millisecond resolution, too coarse for a local socket).
   */
  p50: number;
  p99: number;
  /** Connection errors, timeouts and non-2xx answers: a fair run has none. */
  failures: number;
  requests: number;
}

export interface LoadOptions {
  socketPath: string;
  path: string;
  body: string;
  connections: number;
  durationSeconds: number;
}

/** The p-th percentile (0..100) of sorted values, nearest-rank. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const times: number[] = [];
  const instance = autocannon({
    url: `http://localhost${o.path}`,
    socketPath: o.socketPath,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: o.body,
    connections: o.connections,
    duration: o.durationSeconds,
    pipelining: 1,
  });
  instance.on('response', (_client, statusCode, _bytes, ms) => {
    if (statusCode >= 200 && statusCode < 300) times.push(ms);
  });
  const r = await instance;
  const sorted = Float64Array.from(times).sort();
  return {
    rps: r.requests.average,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    failures: r.errors + r.timeouts + r.non2xx,
    requests: r['2xx'],
  };
}
