import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RpcCallMetrics } from '../../../src/metrics/rpc-calls.js';

const BOUNDS = [0.001, 0.01, 0.1, 1];

/** The same calls through prom-client's own Counter and Histogram, for comparison. */
function reference(calls: readonly [string, string, number][]): Registry {
  const registry = new Registry();
  const requests = new Counter({
    name: 'agentd_rpc_requests_total',
    help: 'JSON-RPC calls by method and result code (ok, or the error code).',
    labelNames: ['method', 'code'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'agentd_rpc_request_duration_seconds',
    help: 'JSON-RPC call latency by method.',
    labelNames: ['method'],
    buckets: BOUNDS,
    registers: [registry],
  });
  for (const [method, code, seconds] of calls) {
    requests.inc({ method, code });
    duration.observe({ method }, seconds);
  }
  return registry;
}

describe('RpcCallMetrics', () => {
  const calls: [string, string, number][] = [
    ['status', 'ok', 0.0002],
    ['status', 'ok', 0.001], // on a bound: counted in it (le)
    ['status', 'ok', 0.05],
    ['update', 'BUSY', 0.002],
    ['update', 'ok', 3], // above every bound: only +Inf
    ['update', 'BUSY', 0.5],
    ['(unknown)', 'NOT_FOUND', 0.0001], // a method that never succeeded has no ok sample
  ];

  it("renders exactly what prom-client's Counter and Histogram render for the same calls", async () => {
    const registry = new Registry();
    const m = new RpcCallMetrics(registry, BOUNDS);
    for (const [method, code, seconds] of calls) m.method(method).record(code, seconds);
    expect(await registry.metrics()).toBe(await reference(calls).metrics());
  });

  it('get() and the registry JSON have prom-client shapes; reset clears both metrics', async () => {
    const registry = new Registry();
    const m = new RpcCallMetrics(registry, BOUNDS);
    m.method('status').record('ok', 0.0002);
    expect((await m.requests.get()).values).toEqual([{ value: 1, labels: { method: 'status', code: 'ok' } }]);
    const json = await registry.getMetricsAsJSON();
    expect(json.map((x) => [x.name, x.type])).toEqual([
      ['agentd_rpc_requests_total', 'counter'],
      ['agentd_rpc_request_duration_seconds', 'histogram'],
    ]);
    registry.resetMetrics();
    expect((await m.requests.get()).values).toEqual([]);
    expect((await m.duration.get()).values).toEqual([]);
  });

  it('the tally of a method is one object, bound once', () => {
    const m = new RpcCallMetrics(new Registry(), BOUNDS);
    expect(m.method('status')).toBe(m.method('status'));
  });
});
