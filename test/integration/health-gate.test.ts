// Why the fake API server (test/support/fake-kube): no fault: the Node’s kubelet version set at chosen moments (the control plane’s kubelet stand-in can too); portable, not covered in test/cluster.
/**
 * The health gate in the daemon (docs/fleet.md, "The health gate"): agentd in process on the simulated
 * host, with `--kubeconfig` pointing at the fake API server and a fleet policy getter giving the
 * gate its `healthChecks`. The Node read over real HTTP decides commit or rollback, alongside an
 * http check against a 127.0.0.1 server and an exec check inside the new machine.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadDaemonConfig } from '../../src/config/load-config.js';
import { startDaemon } from '../../src/daemon/daemon.js';
import { HealthChecksSchema } from '../../src/fleet/health-checks-schema.js';
import type { HealthChecks } from '../../src/fleet/health-checks-schema.js';
import { createRpcClient } from '../../src/rpc/client.js';
import { createInProcessTransport } from '../../src/rpc/in-process-transport.js';
import { startFakeKube } from '../support/fake-kube.js';

const NODE = 'sim-node';

describe('the health gate in the daemon', () => {
  it('rolls an update back while the Node reports the old kubelet, and commits once it reports the new one', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    kube.addNode(NODE, { kubeletVersion: 'v1.34.0' });
    const app = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    onTestFinished(() => new Promise<void>((r) => app.close(() => r())));
    const appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/healthz`;

    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-health-gate-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfig, kube.kubeconfigYaml());
    await writeFile(path.join(dir, 'config.yaml'), '');
    const config = loadDaemonConfig({
      flags: {
        config: path.join(dir, 'config.yaml'),
        sim: true,
        socket: path.join(dir, 'agentd.sock'),
        pidFile: path.join(dir, 'agentd.pid'),
        stateDir: path.join(dir, 'state'),
        root: path.join(dir, 'root'),
        kubeconfig,
        machineName: NODE,
        watch: false,
        repair: false,
      },
      env: {},
      cwd: dir,
      isTTY: false,
    });
    // The fleet policy of the moment, as the policy watcher would give it: none at first.
    let policy: HealthChecks | null = null;
    const daemon = await startDaemon(config, {
      logger: pino({ level: 'silent' }),
      healthChecks: () => policy,
    });
    onTestFinished(() => daemon.stop('test done'));
    const rpc = createRpcClient(createInProcessTransport(daemon.dispatcher, 'test'));
    const phase = (op: { phases: Array<{ name: string; state: string }> }, name: string) =>
      op.phases.find((p) => p.name === name)?.state;

    // No policy: the join commits after verify, the health phase skipped.
    const join = await rpc.call('update', { wait: true });
    expect(join.state).toBe('succeeded');
    expect(phase(join, 'health')).toBe('skipped');

    policy = HealthChecksSchema.parse({
      nodeReadyTimeoutSeconds: 2,
      checks: [
        { name: 'app', timeoutSeconds: 2, http: { url: appUrl } },
        {
          name: 'kubelet-binary',
          timeoutSeconds: 2,
          exec: { command: ['test', '-x', '/usr/local/bin/kubelet'] },
        },
      ],
    });
    const dry = await rpc.call('update', { set: { kubernetesVersion: '1.35.0' }, dryRun: true });
    expect((dry.result?.plan as { phases: string[] }).phases).toContain('health');

    // The Node still reports kubelet v1.34.0: the gate fails and the node goes back to kube1.
    const bad = await rpc.call('update', { set: { kubernetesVersion: '1.35.0' }, wait: true });
    expect(bad.state).toBe('rolled_back');
    expect(phase(bad, 'verify')).toBe('succeeded');
    expect(phase(bad, 'health')).toBe('failed');
    expect(bad.error?.code).toBe('HEALTH_GATE_FAILED');
    const failed = bad.error?.data?.failed as Array<{ name: string; observed: string }>;
    expect(failed.map((c) => c.name)).toEqual(['node-ready']);
    expect(failed[0]?.observed).toMatch(/reports kubelet v1\.34\.0, not v1\.35\.0/);
    expect(bad.error?.data?.diagnostics).toBeDefined();
    let status = await rpc.call('status');
    expect(status.node.activeMachine).toBe('kube1');
    expect(status.node.applied?.kubernetesVersion).toBe('1.34.0');

    // The new kubelet registers: the same update (asked locally, so never blocked) commits.
    kube.setNodeStatus(NODE, { ready: true, kubeletVersion: 'v1.35.0' });
    const good = await rpc.call('update', { set: { kubernetesVersion: '1.35.0' }, wait: true });
    expect(good.state).toBe('succeeded');
    expect(phase(good, 'health')).toBe('succeeded');
    expect((good.result?.healthGate as { checks: Array<{ name: string; ok: boolean }> }).checks).toEqual([
      expect.objectContaining({ name: 'node-ready', ok: true }),
      expect.objectContaining({ name: 'app', ok: true }),
      expect.objectContaining({ name: 'kubelet-binary', ok: true }),
    ]);
    status = await rpc.call('status');
    expect(status.node.activeMachine).toBe('kube2');

    const metrics = await daemon.metrics.registry.getSingleMetricAsString('agentd_health_gate_checks_total');
    expect(metrics).toMatch(/agentd_health_gate_checks_total\{check="node-ready",result="fail"\} 1/);
    expect(metrics).toMatch(/agentd_health_gate_checks_total\{check="node-ready",result="pass"\} 1/);
    expect(metrics).toMatch(/agentd_health_gate_checks_total\{check="app",result="pass"\} 2/);
  });
});
