/** The gauges set from `status` before a scrape: the running phase, the watcher, repair. */
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/metrics/metrics.js';

async function text(metrics: ReturnType<typeof createMetrics>): Promise<string> {
  return metrics.registry.metrics();
}

const idle = { operation: null, repair: { state: 'idle' as const }, watcher: null };

describe('status gauges', () => {
  it('show the running phase of the running operation, with its start time', async () => {
    const m = createMetrics({ version: '0.0.0-test', collectDefaults: false });
    m.statusGauges.observe({
      ...idle,
      operation: {
        kind: 'update',
        phases: [
          { name: 'preflight', state: 'succeeded', startedAt: '2026-03-01T10:00:00.000Z' },
          { name: 'provision', state: 'running', startedAt: '2026-03-01T10:00:05.000Z' },
          { name: 'stage', state: 'pending', startedAt: null },
        ],
      },
    });
    const t = await text(m);
    expect(t).toContain(
      `agentd_operation_phase_start_timestamp_seconds{kind="update",phase="provision"} ${Date.parse('2026-03-01T10:00:05Z') / 1000}`,
    );
    expect(t).not.toContain('phase="preflight"');
    // The operation ends: its series goes, none is left behind.
    m.statusGauges.observe(idle);
    expect(await text(m)).not.toMatch(/^agentd_operation_phase_start_timestamp_seconds\{/m);
  });

  it('give the watcher one state: off without wiring or when disabled, else connected or disconnected', async () => {
    const m = createMetrics({ version: '0.0.0-test', collectDefaults: false });
    const seen = async (): Promise<string[]> =>
      [...(await text(m)).matchAll(/^agentd_watcher_state\{state="([a-z]+)"\} 1$/gm)].map((x) => x[1]!);
    m.statusGauges.observe(idle);
    expect(await seen()).toEqual(['off']);
    m.statusGauges.observe({ ...idle, watcher: { enabled: false, connected: false } });
    expect(await seen()).toEqual(['off']);
    m.statusGauges.observe({ ...idle, watcher: { enabled: true, connected: false } });
    expect(await seen()).toEqual(['disconnected']);
    m.statusGauges.observe({ ...idle, watcher: { enabled: true, connected: true } });
    expect(await seen()).toEqual(['connected']);
    expect(await text(m)).toContain('agentd_watcher_state{state="disconnected"} 0');
  });

  it('give repair its state, gave_up included', async () => {
    const m = createMetrics({ version: '0.0.0-test', collectDefaults: false });
    m.statusGauges.observe({ ...idle, repair: { state: 'gave_up' } });
    const t = await text(m);
    expect(t).toContain('agentd_repair_state{state="gave_up"} 1');
    expect(t).toContain('agentd_repair_state{state="idle"} 0');
    m.statusGauges.observe({ ...idle, repair: null });
    expect(await text(m)).toContain('agentd_repair_state{state="off"} 1');
  });
});

describe('zeroOperationSeries', () => {
  it('exports agentd_operations_total at 0 for each kind and result before any operation ends', async () => {
    const m = createMetrics({ version: '0.0.0-test', collectDefaults: false });
    expect(await text(m)).not.toContain('agentd_operations_total{');
    m.zeroOperationSeries(['update', 'drain'], new Set(['failed', 'rolled_back']));
    const t = await text(m);
    expect(t).toContain('agentd_operations_total{kind="update",result="rolled_back"} 0');
    expect(t).toContain('agentd_operations_total{kind="drain",result="failed"} 0');
  });
});
