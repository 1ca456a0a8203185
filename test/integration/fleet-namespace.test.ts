// Why the fake API server (test/support/fake-kube): no fault: --fleet-namespace against any server; portable, not covered in test/cluster.
/**
 * `--fleet-namespace` (docs/fleet.md): agentd in process on the simulated host, with `--kubeconfig`
 * pointing at the fake API server, reads the policy and takes its slot in the namespace it is
 * given, and ignores the fleet objects of the default namespace.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadDaemonConfig } from '../../src/config/load-config.js';
import { startDaemon } from '../../src/daemon/daemon.js';
import { createRpcClient } from '../../src/rpc/client.js';
import { createInProcessTransport } from '../../src/rpc/in-process-transport.js';
import { startFakeKube } from '../support/fake-kube.js';

describe('--fleet-namespace', () => {
  it('takes its slots in the namespace it is given', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-fleet-ns-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfig, kube.kubeconfigYaml());
    await writeFile(path.join(dir, 'config.yaml'), 'fleetNamespace: rollout-a\n');
    const config = loadDaemonConfig({
      flags: {
        config: path.join(dir, 'config.yaml'),
        sim: true,
        socket: path.join(dir, 'agentd.sock'),
        pidFile: path.join(dir, 'agentd.pid'),
        stateDir: path.join(dir, 'state'),
        root: path.join(dir, 'root'),
        kubeconfig,
        machineName: 'sim-node',
        watch: false,
        repair: false,
      },
      env: {},
      cwd: dir,
      isTTY: false,
    });
    expect(config.fleetNamespace).toBe('rollout-a');
    const daemon = await startDaemon(config, { logger: pino({ level: 'silent' }) });
    onTestFinished(() => daemon.stop('test done'));
    const rpc = createRpcClient(createInProcessTransport(daemon.dispatcher, 'test'));
    expect((await rpc.call('update', { wait: true })).state).toBe('succeeded');

    // The default namespace's policy pauses the fleet: this node must not see it.
    kube.putConfigMap('agentd-system', 'agentd-fleet', { 'policy.yaml': 'paused: true' });
    kube.putConfigMap('rollout-a', 'agentd-fleet', {
      'policy.yaml': 'maxConcurrent: 2\nhealthChecks: {nodeReady: false}\n',
    });
    await expect.poll(async () => (await rpc.call('fleet.status')).policy?.maxConcurrent).toBe(2);
    const status = await rpc.call('fleet.status');
    expect(status).toMatchObject({ namespace: 'rollout-a', paused: false });

    const op = await rpc.call('update', { set: { kubernetesVersion: '1.35.0' }, wait: true });
    expect(op.state).toBe('succeeded');
    expect(op.phases.find((p) => p.name === 'slot')?.state).toBe('succeeded');
    const slots = kube.listLeases('rollout-a');
    expect(slots.map((l) => l.metadata.name)).toEqual([expect.stringMatching(/^agentd-slot-[01]$/)]);
    expect(slots[0]?.spec?.holderIdentity).toBe('');
    expect(kube.listLeases('agentd-system')).toEqual([]);
    expect(kube.countRequests({ path: /\/namespaces\/agentd-system\// })).toBe(0);
  });
});
