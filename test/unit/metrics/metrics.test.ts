/** The exposition follows Prometheus naming: no gauge ends in _total, every counter does. */
import { describe, expect, it } from 'vitest';
import { MISNAMED_DEFAULT_METRICS, createMetrics } from '../../../src/metrics/metrics.js';

describe('createMetrics with the default process metrics', () => {
  it('exports no gauge named like a counter, and every counter ends in _total', async () => {
    const metrics = createMetrics({ version: 'test' });
    const all = await metrics.registry.getMetricsAsJSON();
    expect(all.length).toBeGreaterThan(20);
    for (const m of all) {
      if (String(m.type) === 'counter') expect(m.name, m.name).toMatch(/_total$/);
      else expect(m.name, `${m.name} (${String(m.type)})`).not.toMatch(/_total$/);
    }
    const names = all.map((m) => m.name);
    for (const name of MISNAMED_DEFAULT_METRICS) expect(names).not.toContain(name);
    // The values stay available, per type, under the correctly named gauges.
    expect(names).toEqual(expect.arrayContaining(['nodejs_active_handles', 'nodejs_active_requests']));
  });

  it('publishes the node health metrics', async () => {
    const metrics = createMetrics({ version: 'test', collectDefaults: false });
    metrics.nodeServing.set(0);
    metrics.kubeletState.set({ machine: 'kube1', state: 'failed' }, 1);
    const text = await metrics.registry.metrics();
    expect(text).toContain('agentd_node_serving 0');
    expect(text).toContain('agentd_machine_kubelet_state{machine="kube1",state="failed"} 1');
  });
});
