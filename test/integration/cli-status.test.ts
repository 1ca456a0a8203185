/**
 * agentctl against the real daemon over the real socket. One daemon serves every test here:
 * none of them changes its state.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { startTestDaemon, type TestDaemon } from '../support/daemon.js';

let d: TestDaemon;
beforeAll(async () => {
  d = await startTestDaemon();
});
afterAll(async () => {
  await d?.dispose();
});

const ctl = (...args: string[]) => runAgentctl(['--socket', d.socket, ...args]);

describe('agentctl status', () => {
  it('prints the human status: daemon, node and machines', async () => {
    const r = await ctl('status');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^agentd \\S+  pid ${d.pid}  up \\S+.*ready`, 'm'));
    expect(r.stdout).toContain('not joined');
    expect(r.stdout).toMatch(/^MACHINE\s+STATE\s+KUBELET$/m);
    expect(r.stdout).toMatch(/^kube1\s+absent/m);
    expect(r.stdout).toContain('operation none');
    // Not a terminal: no colors.
    expect(r.stdout).not.toContain('\u001b[');
    expect(r.stderr).toBe('');
  });

  it('--json prints exactly one JSON value', async () => {
    const r = await ctl('--json', 'status');
    expect(r.code, r.stderr).toBe(0);
    const status = JSON.parse(r.stdout) as { daemon: { pid: number; state: string }; node: unknown };
    expect(status.daemon).toMatchObject({ pid: d.pid, state: 'ready' });
    expect(status.node).toMatchObject({ activeMachine: null });
  });

  it('AGENTD_SOCKET finds the daemon without --socket', async () => {
    const r = await runAgentctl(['--json', 'status'], { env: { AGENTD_SOCKET: d.socket } });
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { daemon: { pid: number } }).daemon.pid).toBe(d.pid);
  });

  it('agentctl matches the raw JSON-RPC answer', async () => {
    const raw = (await d.rpc('status')) as { result: { daemon: unknown } };
    const r = await ctl('--json', 'status');
    expect((JSON.parse(r.stdout) as { daemon: unknown }).daemon).toEqual(raw.result.daemon);
  });
});

describe('agentctl rpc', () => {
  it('status prints the result as JSON', async () => {
    const r = await ctl('rpc', 'status');
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { daemon: { pid: number } }).daemon.pid).toBe(d.pid);
  });

  it('config.get on a fresh node is NOT_FOUND: exit 1', async () => {
    const r = await ctl('rpc', 'config.get');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no applied config: the node has not joined yet');
    expect(r.stdout).toBe('');
  });

  it('config.get with --json prints the error with its code on stdout', async () => {
    const r = await ctl('--json', 'rpc', 'config.get');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: 'NOT_FOUND', exitCode: 1 } });
  });

  it('rpc.discover returns the OpenRPC document listing status', async () => {
    const r = await ctl('rpc', 'rpc.discover');
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout) as { openrpc: string; methods: { name: string }[] };
    expect(doc.openrpc).toMatch(/^1\./);
    expect(doc.methods.map((m) => m.name)).toContain('status');
  });

  it('an unknown method: exit 2', async () => {
    const r = await ctl('rpc', 'nosuch');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('nosuch');
  });

  it("positional params '[1]': exit 2", async () => {
    const r = await ctl('rpc', 'status', '[1]');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('PARAMS_JSON');
  });

  it('params that are not JSON: exit 2', async () => {
    const r = await ctl('rpc', 'status', '{nope');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('not valid JSON');
  });

  it('params the method does not take: exit 2 naming the problem', async () => {
    const r = await ctl('rpc', 'status', '{"bogus":1}');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('bogus');
  });
});

describe('agentctl metrics and version', () => {
  it('metrics prints /metrics', async () => {
    await ctl('status');
    const r = await ctl('metrics');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('agentd_build_info');
    expect(r.stdout).toMatch(/agentd_rpc_requests_total\{method="status",code="ok"\} [1-9]/);
  });

  it('version shows the client and the daemon', async () => {
    const r = await ctl('--json', 'version');
    expect(r.code, r.stderr).toBe(0);
    const v = JSON.parse(r.stdout) as {
      client: { version: string };
      daemon: { version: string; pid: number };
    };
    expect(v.daemon).toEqual({ version: v.client.version, pid: d.pid });
  });
});
