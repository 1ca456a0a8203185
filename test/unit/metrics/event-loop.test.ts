/**
 * The event-loop delay family samples only while /metrics is scraped (src/metrics/event-loop.ts):
 * nothing runs before the first scrape, a scrape reports what was sampled since the previous
 * one, as the delay past the sampling interval, and sampling stops when scrapes stop. The
 * monitor and the switch-off timer are the test's: no wall-clock time is measured here.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  EVENT_LOOP_DELAY_METRICS,
  registerEventLoopDelay,
  type DelayMonitor,
} from '../../../src/metrics/event-loop.js';
import { createMetrics } from '../../../src/metrics/metrics.js';

const MS = 1e6; // ns

/** A monitor whose samples (ns) the test sets; it counts its calls. */
function fakeMonitor(): DelayMonitor & { samples: number[]; enabled: boolean; resets: number } {
  const m = {
    samples: [] as number[],
    enabled: false,
    resets: 0,
    get count() {
      return m.samples.length;
    },
    get min() {
      return Math.min(...m.samples);
    },
    get max() {
      return Math.max(...m.samples);
    },
    get mean() {
      return m.samples.reduce((a, b) => a + b, 0) / m.samples.length;
    },
    get stddev() {
      return 0;
    },
    percentile(p: number) {
      const sorted = [...m.samples].sort((a, b) => a - b);
      return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
    },
    enable() {
      m.enabled = true;
      return true;
    },
    disable() {
      m.enabled = false;
      return true;
    },
    reset() {
      m.samples = [];
      m.resets += 1;
    },
  };
  return m;
}

function setup(resolutionMs = 100) {
  const registry = new Registry();
  const monitors: Array<ReturnType<typeof fakeMonitor>> = [];
  const timers: Array<{ ms: number; fn: () => void; cancelled: boolean }> = [];
  const monitor = registerEventLoopDelay(registry, {
    resolutionMs,
    idleOffMs: 60_000,
    createMonitor: (resolution) => {
      expect(resolution).toBe(resolutionMs);
      const m = fakeMonitor();
      monitors.push(m);
      return m;
    },
    after: (ms, fn) => {
      const t = { ms, fn, cancelled: false };
      timers.push(t);
      return () => (t.cancelled = true);
    },
  });
  // One scrape's values, read from its text (reading a gauge again would collect again).
  const scrape = async (): Promise<Record<string, number>> =>
    Object.fromEntries(
      (await registry.metrics())
        .split('\n')
        .filter((l) => l.startsWith('nodejs_eventloop_lag_'))
        .map((l) => [l.split(' ')[0], Number(l.split(' ')[1])]),
    );
  return { registry, monitor, monitors, timers, scrape };
}

describe('event-loop delay metrics', () => {
  it('sample nothing until scraped, then report the delays seen since the previous scrape', async () => {
    const { monitor, monitors, scrape, registry } = setup();
    expect(monitor.active()).toBe(false);
    expect(monitors).toHaveLength(0);
    const first = await scrape();
    expect(monitor.active()).toBe(true);
    expect(monitors).toHaveLength(1);
    expect(monitors[0]?.enabled).toBe(true);
    // The first scrape had no samples yet.
    expect(Number.isNaN(first.nodejs_eventloop_lag_p99_seconds)).toBe(true);
    monitors[0]!.samples = [100 * MS, 100 * MS, 110 * MS];
    const text = await registry.metrics();
    for (const [name] of Object.values(EVENT_LOOP_DELAY_METRICS)) expect(text).toContain(`${name} `);
    // Each scrape starts a new window.
    expect(monitors[0]?.resets).toBe(1);
    expect(monitors).toHaveLength(1);
  });

  it('report the delay past the sampling interval: 0 on an idle loop, the stall when it is blocked', async () => {
    const { monitors, scrape } = setup(100);
    await scrape();
    // Node records the whole interval (100 ms here) between wake-ups; idle is not lag, and a
    // wake-up a little early (the timer's rounding) is not negative lag.
    monitors[0]!.samples = [100 * MS, 99 * MS, 100 * MS, 100 * MS];
    const idle = await scrape();
    expect(idle.nodejs_eventloop_lag_min_seconds).toBe(0);
    expect(idle.nodejs_eventloop_lag_p50_seconds).toBe(0);
    expect(idle.nodejs_eventloop_lag_max_seconds).toBe(0);
    // One wake-up 250 ms late.
    monitors[0]!.samples = [100 * MS, 100 * MS, 350 * MS];
    const blocked = await scrape();
    expect(blocked.nodejs_eventloop_lag_max_seconds).toBeCloseTo(0.25, 9);
    expect(blocked.nodejs_eventloop_lag_p99_seconds).toBeCloseTo(0.25, 9);
    expect(blocked.nodejs_eventloop_lag_min_seconds).toBe(0);
  });

  it('stop sampling when no scrape came for idleOffMs, and start again at the next scrape', async () => {
    const { monitor, monitors, timers, scrape } = setup();
    await scrape();
    await scrape();
    // Each scrape pushes the switch-off back: only the last one is pending.
    expect(timers.map((t) => [t.ms, t.cancelled])).toEqual([
      [60_000, true],
      [60_000, false],
    ]);
    timers[1]!.fn();
    expect(monitor.active()).toBe(false);
    expect(monitors[0]?.enabled).toBe(false);
    await scrape();
    expect(monitor.active()).toBe(true);
    expect(monitors).toHaveLength(2);
    monitor.stop();
    expect(monitors[1]?.enabled).toBe(false);
    expect(timers.at(-1)?.cancelled).toBe(true);
  });

  it("agentd's registry exports the family once, from this module", async () => {
    const { registry } = createMetrics({ version: 'test' });
    const text = await registry.metrics();
    for (const [name, help] of Object.values(EVENT_LOOP_DELAY_METRICS)) {
      expect(text.split('\n').filter((l) => l === `# HELP ${name} ${help}`)).toHaveLength(1);
    }
    expect(text).toContain('nodejs_eventloop_lag_seconds ');
  });
});
