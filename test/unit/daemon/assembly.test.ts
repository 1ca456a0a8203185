/**
 * The daemon's assembly (src/daemon/assembly.ts) on a fake host: one path for a call, from the
 * admin app's `/rpc` route through the dispatcher and a method to a port of the engine; the
 * engine is each port the methods are given; readiness and the gate of mutating calls follow
 * the daemon's state.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assembled, type Assembled } from '../rpc/assembled.js';

let a: Assembled | null = null;
afterEach(async () => {
  await a?.close();
  a = null;
});

async function rpc(x: Assembled, method: string, params: Record<string, unknown> = {}) {
  const res = await x.admin.inject({
    method: 'POST',
    url: '/rpc',
    headers: { 'content-type': 'application/json', 'x-agentd-caller': 'test' },
    payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  expect(res.statusCode).toBe(200);
  return res.json<{ result?: Record<string, unknown>; error?: { data: { code: string } } }>();
}

describe('assembleDaemon', () => {
  it('the methods reach the engine through its ports, and nothing else', async () => {
    a = await assembled();
    expect(a.services.status).toBe(a.engine);
    expect(a.services.operations).toBe(a.engine);
    expect(a.services.drain).toBe(a.engine);
    expect(Object.keys(a.services)).not.toContain('engine');
  });

  it('a call goes route → dispatcher → method → port: status, then a join, as served', async () => {
    a = await assembled();
    expect(a.readiness()).toEqual({ ready: false, reasons: ['startup recovery has not finished'] });
    // Before ready a mutating call is refused by the dispatcher; the engine is never asked.
    expect((await rpc(a, 'update', { wait: true })).error?.data.code).toBe('UNAVAILABLE');
    expect(a.f.log.calls).toEqual([]);
    await a.engine.start();
    a.daemonState.set('ready');
    expect(a.readiness()).toEqual({ ready: true, reasons: [] });
    const join = await rpc(a, 'update', { wait: true });
    expect(join.result).toMatchObject({
      kind: 'update',
      state: 'succeeded',
      to: 'kube1',
      requestedBy: 'test',
    });
    expect(a.f.log.calls).toContain('provision kube1');
    const status = await rpc(a, 'status');
    expect(status.result).toMatchObject({
      daemon: { state: 'ready', host: 'sim' },
      node: { activeMachine: 'kube1', serving: true, warnings: [], warningDetails: [] },
      lastOperation: { id: join.result?.id },
    });
    a.daemonState.set('draining');
    expect(a.readiness()).toEqual({ ready: false, reasons: ['shutting down'] });
    expect((await rpc(a, 'reset')).error?.data.code).toBe('DRAINING');
  });
});
