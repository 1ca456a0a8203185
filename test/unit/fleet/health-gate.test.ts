import { createServer } from 'node:http';
import type { AddressInfo, Server } from 'node:net';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentError } from '../../../src/errors.js';
import { HealthChecksSchema } from '../../../src/fleet/health-checks-schema.js';
import type { HealthChecks } from '../../../src/fleet/health-checks-schema.js';
import { createHealthGate, judgeNode } from '../../../src/fleet/health-gate.js';
import type { HealthGateOptions, MachineExec, NodeHealthSource } from '../../../src/fleet/health-gate.js';
import { runInMachine } from '../../../src/host/machines.js';
import { createHostPaths } from '../../../src/host/paths.js';
import type { NodeHealth } from '../../../src/kube/node-health.js';
import { readNodeHealth } from '../../../src/kube/node-health.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { createSimHost } from '../../../src/sim/host/index.js';
import { createFakeClock } from '../host/fake-clock.js';
import { makeTempRoot, prepareMachine } from '../sim/host/sim-fixtures.js';

const logger = pino({ level: 'silent' });
const target = { machine: 'kube2' as const, kubernetesVersion: '1.35.0' };
const policy = (p: Record<string, unknown>): HealthChecks => HealthChecksSchema.parse(p);
const noExec: MachineExec = () => Promise.reject(new Error('exec not expected'));

function node(over: Partial<NodeHealth> = {}): NodeHealth {
  return { name: 'worker-1', ready: true, readyCondition: 'True', kubeletVersion: 'v1.35.0', ...over };
}

function gate(over: Partial<HealthGateOptions> & { nodes?: NodeHealth[] } = {}) {
  const clock = createFakeClock();
  const metrics = createMetrics({ version: 't', collectDefaults: false });
  let reads = 0;
  const nodes = over.nodes ?? [node()];
  const source: NodeHealthSource = {
    read: () => Promise.resolve(nodes[Math.min(reads++, nodes.length - 1)] as NodeHealth),
  };
  const g = createHealthGate({
    checks: () => null,
    node: () => source,
    exec: noExec,
    clock,
    logger,
    metrics,
    backoff: { baseMs: 1_000, maxMs: 10_000, random: () => 0.5 },
    ...over,
  });
  const counter = async (check: string, result: string): Promise<number> => {
    const m = await metrics.healthGateChecks.get();
    return m.values.find((v) => v.labels.check === check && v.labels.result === result)?.value ?? 0;
  };
  return { g, clock, counter, reads: () => reads };
}

async function failure(p: Promise<unknown>): Promise<AgentError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AgentError);
    return err as AgentError;
  }
  throw new Error('expected the gate to fail');
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function serve(status: number): Promise<string> {
  const s = createServer((_req, res) => {
    res.statusCode = status;
    res.end('body');
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}/healthz`;
}

describe('judgeNode', () => {
  it('wants Ready=True and the target kubelet version, with or without the leading v', () => {
    expect(judgeNode(node(), '1.35.0').ok).toBe(true);
    expect(judgeNode(node({ kubeletVersion: '1.35.0' }), 'v1.35.0').ok).toBe(true);
    expect(judgeNode(node({ kubeletVersion: 'v1.34.2' }), '1.35.0')).toMatchObject({
      ok: false,
      observed: expect.stringMatching(/reports kubelet v1\.34\.2, not v1\.35\.0/),
    });
    expect(judgeNode(node({ kubeletVersion: null }), '1.35.0').ok).toBe(false);
    expect(
      judgeNode(node({ ready: false, readyCondition: 'False: KubeletNotReady' }), '1.35.0'),
    ).toMatchObject({
      ok: false,
      observed: expect.stringMatching(/not Ready \(Ready=False: KubeletNotReady\)/),
    });
  });

  it('reads a Node object: the Ready condition and nodeInfo', () => {
    const h = readNodeHealth({
      metadata: { name: 'w' },
      status: {
        conditions: [
          { type: 'MemoryPressure', status: 'False' },
          { type: 'Ready', status: 'False', reason: 'KubeletNotReady', message: 'CNI not ready' },
        ],
        nodeInfo: { kubeletVersion: 'v1.35.0' },
      },
    });
    expect(h).toEqual({
      name: 'w',
      ready: false,
      readyCondition: 'False: KubeletNotReady: CNI not ready',
      kubeletVersion: 'v1.35.0',
    });
    expect(readNodeHealth({ metadata: { name: 'w' } })).toMatchObject({
      ready: false,
      readyCondition: 'no Ready condition',
      kubeletVersion: null,
    });
  });
});

describe('the node-ready part', () => {
  it('passes once the Node turns Ready with the target version, retrying on the clock', async () => {
    const { g, clock, counter } = gate({
      nodes: [node({ ready: false, readyCondition: 'False' }), node({ kubeletVersion: 'v1.34.0' }), node()],
    });
    const report = await g.run(policy({ nodeReadyTimeoutSeconds: 60 }), target, new AbortController().signal);
    expect(report.checks).toEqual([
      expect.objectContaining({ name: 'node-ready', kind: 'node-ready', ok: true, attempts: 3 }),
    ]);
    expect(clock.sleeps.length).toBe(2);
    expect(await counter('node-ready', 'pass')).toBe(1);
  });

  it('fails HEALTH_GATE_FAILED after nodeReadyTimeoutSeconds of a Node that is not Ready', async () => {
    const { g, clock, counter } = gate({
      nodes: [node({ ready: false, readyCondition: 'False: KubeletNotReady' })],
    });
    const start = clock.now();
    const err = await failure(
      g.run(policy({ nodeReadyTimeoutSeconds: 30 }), target, new AbortController().signal),
    );
    expect(err.code).toBe('HEALTH_GATE_FAILED');
    expect(clock.now() - start).toBe(30_000);
    expect(err.data.failed).toEqual([
      expect.objectContaining({
        name: 'node-ready',
        ok: false,
        observed: expect.stringMatching(/not Ready/),
      }),
    ]);
    expect(await counter('node-ready', 'fail')).toBe(1);
  });

  it('fails on a kubelet version other than the target', async () => {
    const { g } = gate({ nodes: [node({ kubeletVersion: 'v1.34.0' })] });
    const err = await failure(
      g.run(policy({ nodeReadyTimeoutSeconds: 5 }), target, new AbortController().signal),
    );
    expect(err.data.failed).toEqual([
      expect.objectContaining({ observed: expect.stringMatching(/kubelet v1\.34\.0, not v1\.35\.0/) }),
    ]);
  });

  it('counts a Node that cannot be read as a failed attempt', async () => {
    const { g } = gate({
      node: () => ({ read: () => Promise.reject(new Error('read Node worker-1: connection refused')) }),
    });
    const err = await failure(
      g.run(policy({ nodeReadyTimeoutSeconds: 3 }), target, new AbortController().signal),
    );
    expect(err.data.failed).toEqual([
      expect.objectContaining({ observed: expect.stringMatching(/refused/) }),
    ]);
  });

  it('is not checked without Kubernetes credentials: a warning, and the rest of the gate decides', async () => {
    const { g } = gate({ node: () => ({ unavailable: 'no Kubernetes credentials' }) });
    const report = await g.run(policy({}), target, new AbortController().signal);
    expect(report.checks).toEqual([]);
    expect(report.warnings).toEqual([
      expect.stringMatching(/nodeReady was not checked.*no Kubernetes credentials/),
    ]);
  });

  it('is skipped with nodeReady: false', async () => {
    const { g, reads } = gate();
    const report = await g.run(policy({ nodeReady: false }), target, new AbortController().signal);
    expect(report.checks).toEqual([]);
    expect(reads()).toBe(0);
  });
});

describe('http checks', () => {
  const http = (url: string, expectStatus?: number): HealthChecks =>
    policy({ nodeReady: false, checks: [{ name: 'app', timeoutSeconds: 5, http: { url, expectStatus } }] });

  it('passes on the expected status from a 127.0.0.1 server', async () => {
    const { g, counter } = gate();
    const report = await g.run(http(await serve(200)), target, new AbortController().signal);
    expect(report.checks).toEqual([
      expect.objectContaining({ name: 'app', kind: 'http', ok: true, attempts: 1 }),
    ]);
    expect(await counter('app', 'pass')).toBe(1);
    const { g: g2 } = gate();
    const r2 = await g2.run(http(await serve(204), 204), target, new AbortController().signal);
    expect(r2.checks[0]?.ok).toBe(true);
  });

  it('fails on a 500 after retrying until its timeout', async () => {
    const { g, clock, counter } = gate();
    const err = await failure(g.run(http(await serve(500)), target, new AbortController().signal));
    expect(err.code).toBe('HEALTH_GATE_FAILED');
    const failed = err.data.failed as Array<{ observed: string; attempts: number }>;
    expect(failed[0]?.observed).toMatch(/HTTP 500 \(expected 200\)/);
    expect(failed[0]?.attempts).toBeGreaterThan(1);
    expect(clock.sleeps.reduce((a, b) => a + b, 0)).toBe(5_000);
    expect(await counter('app', 'fail')).toBe(1);
  });

  it('fails when the connection is refused', async () => {
    const url = await serve(200);
    await new Promise((r) => servers.pop()?.close(r));
    const { g } = gate();
    const err = await failure(g.run(http(url), target, new AbortController().signal));
    expect((err.data.failed as Array<{ observed: string }>)[0]?.observed).toMatch(
      new RegExp(`^GET ${url.replace(/[.]/g, '\\.')}: .*(ECONNREFUSED|refused)`, 'i'),
    );
  });

  it('names every failed check, and only those', async () => {
    const { g } = gate({ nodes: [node({ kubeletVersion: 'v1.34.0' })] });
    const checks = policy({
      nodeReadyTimeoutSeconds: 2,
      checks: [
        { name: 'good', timeoutSeconds: 2, http: { url: await serve(200) } },
        { name: 'bad', timeoutSeconds: 2, http: { url: await serve(503) } },
      ],
    });
    const err = await failure(g.run(checks, target, new AbortController().signal));
    expect((err.data.failed as Array<{ name: string }>).map((c) => c.name).sort()).toEqual([
      'bad',
      'node-ready',
    ]);
    expect((err.data.checks as unknown[]).length).toBe(3);
    expect(err.message).toMatch(/bad: GET .*HTTP 503/);
  });

  it('ends CANCELLED when the signal aborts', async () => {
    const { g } = gate();
    const ac = new AbortController();
    ac.abort();
    const err = await failure(g.run(http(await serve(500)), target, ac.signal));
    expect(err.code).toBe('CANCELLED');
  });
});

describe('exec checks in the simulated host', () => {
  it('runs the command inside the target machine: passes on exit 0, fails with what it saw', async () => {
    const tmp = await makeTempRoot();
    try {
      const clock = createFakeClock();
      const host = createSimHost({ root: tmp.root, clock });
      await prepareMachine(tmp.root, 'kube2', { kubeletVersion: '1.35.0' });
      await host.run('machinectl', ['start', 'kube2']);
      await host.run('systemd-run', ['--machine=kube2', '--pipe', '--wait', '/bin/true'], { reject: false });
      const exec: MachineExec = (m, argv, o) => runInMachine(host, m, argv, o);
      const checks = policy({
        nodeReady: false,
        checks: [{ name: 'ready-file', timeoutSeconds: 3, exec: { command: ['test', '-f', '/etc/ready'] } }],
      });
      const { g } = gate({ exec });
      const err = await failure(g.run(checks, target, new AbortController().signal));
      expect(err.data.failed).toEqual([
        expect.objectContaining({ name: 'ready-file', kind: 'exec', observed: 'exit code 1 in kube2' }),
      ]);
      await writeFile(path.join(createHostPaths(tmp.root).machineDir('kube2'), 'etc/ready'), '');
      const { g: g2 } = gate({ exec });
      const report = await g2.run(checks, target, new AbortController().signal);
      expect(report.checks).toEqual([expect.objectContaining({ name: 'ready-file', ok: true, attempts: 1 })]);
    } finally {
      await tmp.cleanup();
    }
  });

  it('reports the output of a failing command', async () => {
    const exec: MachineExec = () =>
      Promise.resolve({
        command: 'x',
        exitCode: 2,
        stdout: '',
        stderr: 'probe: backend down\n',
        durationMs: 1,
      });
    const { g } = gate({ exec });
    const err = await failure(
      g.run(
        policy({
          nodeReady: false,
          checks: [{ name: 'probe', timeoutSeconds: 1, exec: { command: ['/probe'] } }],
        }),
        target,
        new AbortController().signal,
      ),
    );
    expect((err.data.failed as Array<{ observed: string }>)[0]?.observed).toBe(
      'exit code 2 in kube2: probe: backend down',
    );
  });
});
