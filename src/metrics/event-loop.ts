/**
 * The event-loop delay family `nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds`
 * (prom-client's names and meanings), sampled only while someone scrapes `/metrics`. The delay
 * monitor is a libuv timer that wakes the process at every sample: once a second, that alone
 * was about half of an idle agentd's CPU (docs/benchmarks.md, "Footprint"). So the first scrape
 * starts it, each scrape reports what it saw since the previous scrape, and it stops when no
 * scrape came for `idleOffMs`. The first scrape after a pause has no samples yet: its values are
 * NaN.
 *
 * Node's monitor records the whole time between two wake-ups, the sampling interval included: an
 * idle loop reads 10 ms at prom-client's 10-ms interval, and 1 s at ours. Reported as it is, every
 * idle node would show a second of lag and fire any "p99 over 100 ms" alert. So the values are the
 * delay past the interval: how late each wake-up came, 0 on an idle loop (docs/metrics.md).
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';

/** The family, in prom-client's names (its defaults register the same; see metrics.ts). */
export const EVENT_LOOP_DELAY_METRICS = {
  min: ['nodejs_eventloop_lag_min_seconds', 'The minimum recorded event loop delay.'],
  max: ['nodejs_eventloop_lag_max_seconds', 'The maximum recorded event loop delay.'],
  mean: ['nodejs_eventloop_lag_mean_seconds', 'The mean of the recorded event loop delays.'],
  stddev: [
    'nodejs_eventloop_lag_stddev_seconds',
    'The standard deviation of the recorded event loop delays.',
  ],
  p50: ['nodejs_eventloop_lag_p50_seconds', 'The 50th percentile of the recorded event loop delays.'],
  p90: ['nodejs_eventloop_lag_p90_seconds', 'The 90th percentile of the recorded event loop delays.'],
  p99: ['nodejs_eventloop_lag_p99_seconds', 'The 99th percentile of the recorded event loop delays.'],
} as const;

type Stat = keyof typeof EVENT_LOOP_DELAY_METRICS;

/** The part of Node's delay monitor used here (tests give a recorded one). */
export type DelayMonitor = Pick<
  IntervalHistogram,
  'count' | 'min' | 'max' | 'mean' | 'stddev' | 'percentile' | 'enable' | 'disable' | 'reset'
>;

export interface EventLoopDelayOptions {
  /** Sample every this many ms while active (default 1000). */
  resolutionMs?: number;
  /** Stop sampling when no scrape came for this long (default 10 min: any scrape interval). */
  idleOffMs?: number;
  /** Make the monitor (default: node:perf_hooks' monitorEventLoopDelay). */
  createMonitor?: (resolutionMs: number) => DelayMonitor;
  /** Run `fn` after `ms` unless cancelled (default: an unref'd setTimeout). */
  after?: (ms: number, fn: () => void) => () => void;
}

function unrefTimer(ms: number, fn: () => void): () => void {
  const t = setTimeout(fn, ms);
  // A pending switch-off must not keep the process (or a test run) alive.
  t.unref();
  return () => clearTimeout(t);
}

export interface EventLoopDelay {
  /** Whether the monitor samples now. */
  active(): boolean;
  /** Stop sampling (shutdown). A later scrape starts it again. */
  stop(): void;
}

/** Register the family in `registry`. */
export function registerEventLoopDelay(registry: Registry, o: EventLoopDelayOptions = {}): EventLoopDelay {
  const idleOffMs = o.idleOffMs ?? 600_000;
  const resolutionMs = o.resolutionMs ?? 1000;
  const intervalNs = resolutionMs * 1e6;
  const createMonitor = o.createMonitor ?? ((resolution) => monitorEventLoopDelay({ resolution }));
  const after = o.after ?? unrefTimer;
  let histogram: DelayMonitor | null = null;
  let cancelIdle = (): void => undefined;

  const stop = (): void => {
    cancelIdle();
    histogram?.disable();
    histogram = null;
  };
  const read = (h: DelayMonitor | null): Record<Stat, number> => {
    const count = h === null ? 0 : Number(h.count);
    const s = (ns: number): number => (count === 0 ? Number.NaN : ns / 1e9);
    // Past the interval; a wake-up a little early (the timer's own rounding) is not lag.
    const late = (ns: number): number => s(Math.max(0, ns - intervalNs));
    return {
      min: late(h?.min ?? 0),
      max: late(h?.max ?? 0),
      mean: late(h?.mean ?? 0),
      stddev: s(h?.stddev ?? 0),
      p50: late(h?.percentile(50) ?? 0),
      p90: late(h?.percentile(90) ?? 0),
      p99: late(h?.percentile(99) ?? 0),
    };
  };

  const gauges = {} as Record<Stat, Gauge>;
  const collect = (): void => {
    const values = read(histogram);
    for (const stat of Object.keys(gauges) as Stat[]) gauges[stat].set(values[stat]);
    if (histogram === null) {
      histogram = createMonitor(resolutionMs);
      histogram.enable();
    } else histogram.reset();
    cancelIdle();
    cancelIdle = after(idleOffMs, stop);
  };
  for (const [stat, [name, help]] of Object.entries(EVENT_LOOP_DELAY_METRICS) as [
    Stat,
    readonly [string, string],
  ][]) {
    // One gauge's collect sets them all, as prom-client's own does; it is registered first.
    gauges[stat] = new Gauge({ name, help, registers: [registry], ...(stat === 'min' ? { collect } : {}) });
  }
  return { active: () => histogram !== null, stop };
}
