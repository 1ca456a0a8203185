// Why the fake API server (test/support/fake-kube): no fault: agentctl drain/uncordon output and exit codes over pods and a PDB the test places directly; portable (test/cluster/drain.test.ts drains, not through agentctl).
/**
 * `agentctl drain` and `agentctl uncordon` against a real daemon wired to the fake API server
 * (`--sim`, temp paths, `--kubeconfig`): the commands, their JSON and human output and exit
 * codes. Needs `npm run build`.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { makeTempDir, startTestDaemon } from '../support/daemon.js';
import { startFakeKube } from '../support/fake-kube.js';

const NODE = 'sim-node';

async function setup() {
  const kube = await startFakeKube();
  onTestFinished(() => kube.close());
  kube.addNode(NODE, {});
  const dir = await makeTempDir('agentd-cli-drain-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml());
  const d = await startTestDaemon({
    args: ['--sim', '--kubeconfig', kubeconfig, '--machine-name', NODE, '--no-watch'],
  });
  const ctl = (...args: string[]) => runAgentctl(['--socket', d.socket, ...args], { timeoutMs: 20_000 });
  return { kube, d, ctl };
}

describe('agentctl drain / uncordon', () => {
  it('drains (evicting a managed pod), reports it as JSON, then uncordons: exit 0 each', async () => {
    const { kube, ctl } = await setup();
    kube.addPod({ name: 'web-1', nodeName: NODE, owner: { kind: 'ReplicaSet', name: 'web' } });
    kube.addPod({ name: 'agent-x', nodeName: NODE, owner: { kind: 'DaemonSet', name: 'agent' } });

    const drained = await ctl('drain', '--ignore-daemonsets', '--timeout', '20s', '--json');
    expect(drained.code).toBe(0);
    const op = JSON.parse(drained.stdout) as { kind: string; state: string; result: Record<string, unknown> };
    expect(op).toMatchObject({ kind: 'drain', state: 'succeeded' });
    expect(op.result.evicted).toEqual([expect.objectContaining({ name: 'web-1' })]);
    expect(kube.getPod('default', 'web-1')).toBeUndefined();
    expect(kube.getNode(NODE)?.spec?.unschedulable).toBe(true);

    const un = await ctl('uncordon', '--json');
    expect(un.code).toBe(0);
    expect(JSON.parse(un.stdout)).toMatchObject({
      kind: 'uncordon',
      state: 'succeeded',
      result: { uncordoned: true },
    });
    expect(kube.getNode(NODE)?.spec?.unschedulable).not.toBe(true);
  });

  it('a drain refused for an unmanaged pod exits 1 and names the pod; the node is left schedulable', async () => {
    const { kube, ctl } = await setup();
    kube.addPod({ name: 'lonely', nodeName: NODE, owner: null });
    const r = await ctl('drain', '--timeout', '10s');
    expect(r.code).toBe(1);
    expect(`${r.stdout}\n${r.stderr}`).toMatch(/lonely/);
    expect(kube.getPod('default', 'lonely')).toBeDefined();
    expect(kube.getNode(NODE)?.spec?.unschedulable).not.toBe(true);
  });

  it('drain --dry-run changes nothing and exits 0', async () => {
    const { kube, ctl } = await setup();
    kube.addPod({ name: 'web-1', nodeName: NODE, owner: { kind: 'ReplicaSet', name: 'web' } });
    const r = await ctl('drain', '--dry-run', '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ kind: 'drain', state: 'succeeded' });
    expect(kube.getPod('default', 'web-1')).toBeDefined();
    expect(kube.getNode(NODE)?.spec?.unschedulable).not.toBe(true);
  });
});
