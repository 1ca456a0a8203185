/**
 * The event-loop delay family samples only while /metrics is scraped (src/metrics/event-loop.ts):
 * nothing runs before the first scrape, a scrape reports what was sampled since the previous
 * one, and sampling stops when scrapes stop.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  EVENT_LOOP_DELAY_METRICS,
  registerEventLoopDelay,
  type EventLoopDelay,
} from '../../../src/metrics/event-loop.js';
import { createMetrics } from '../../../src/metrics/metrics.js';

const value = async (registry: Registry, name: string): Promise<number> => {
  const m = await registry.getSingleMetric(name)!.get();
  return m.values[0]!.value;
};

describe('event-loop delay metrics', () => {
  let monitor: EventLoopDelay | undefined;
  afterEach(() => monitor?.stop());

  it('sample nothing until scraped, then report the delays seen since the previous scrape', async () => {
    const registry = new Registry();
    monitor = registerEventLoopDelay(registry, { resolutionMs: 10, idleOffMs: 60_000 });
    expect(monitor.active()).toBe(false);
    await registry.metrics();
    expect(monitor.active()).toBe(true);
    // The first scrape had no samples yet.
    expect(Number.isNaN(await value(registry, 'nodejs_eventloop_lag_p99_seconds'))).toBe(true);
    await sleep(100);
    const text = await registry.metrics();
    for (const [name] of Object.values(EVENT_LOOP_DELAY_METRICS)) expect(text).toContain(`${name} `);
    const p50 = await value(registry, 'nodejs_eventloop_lag_p50_seconds');
    expect(p50).toBeGreaterThanOrEqual(0);
    expect(p50).toBeLessThan(10);
  });

  it('report the delay past the sampling interval: ~0 on an idle loop, the stall when it is blocked', async () => {
    const registry = new Registry();
    monitor = registerEventLoopDelay(registry, { resolutionMs: 100, idleOffMs: 60_000 });
    // One scrape's values, read from its text (reading a gauge again would collect again).
    const scrape = async (): Promise<Record<string, number>> =>
      Object.fromEntries(
        (await registry.metrics())
          .split('\n')
          .filter((l) => l.startsWith('nodejs_eventloop_lag_'))
          .map((l) => [l.split(' ')[0], Number(l.split(' ')[1])]),
      );
    await scrape();
    await sleep(450);
    const idle = await scrape();
    // Node records the whole interval (100 ms here) between wake-ups; idle is not lag.
    expect(idle.nodejs_eventloop_lag_min_seconds).toBeLessThan(0.095);
    expect(idle.nodejs_eventloop_lag_p50_seconds).toBeLessThan(0.095);
    // Blocked for 250 ms: a wake-up due inside the block comes at least 150 ms late. (Not at
    // once: a scrape resets the monitor, whose first wake-up after it is not measured.)
    await sleep(150);
    const until = Date.now() + 250;
    while (Date.now() < until);
    await sleep(150);
    const blocked = await scrape();
    expect(blocked.nodejs_eventloop_lag_max_seconds).toBeGreaterThan(0.12);
    expect(blocked.nodejs_eventloop_lag_max_seconds).toBeLessThan(1);
  });

  it('stop sampling when no scrape came for idleOffMs, and start again at the next scrape', async () => {
    const registry = new Registry();
    monitor = registerEventLoopDelay(registry, { resolutionMs: 10, idleOffMs: 50 });
    await registry.metrics();
    expect(monitor.active()).toBe(true);
    await sleep(150);
    expect(monitor.active()).toBe(false);
    await registry.metrics();
    expect(monitor.active()).toBe(true);
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
