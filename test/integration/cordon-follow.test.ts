// Why the fake API server (test/support/fake-kube): no fault: a cordon behind agentd’s back and a ClusterRole without list/watch on nodes, both possible on kube-apiserver; portable, not covered in test/cluster.
/**
 * `status.node.cordoned` follows the node's Node object (a watch of its name), through the real
 * daemon (`--sim`, `--kubeconfig`, with the Machine watcher and without) and the fake API server: a `kubectl
 * cordon` or `uncordon` behind agentd's back shows in `status`. With the rights of
 * deploy/rbac.yaml it watches; with an older ClusterRole that cannot list and watch nodes it
 * reads the Node once and says why in its log. Needs `npm run build`.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeTempDir, startTestDaemon, waitUntil, type TestDaemon } from '../support/daemon.js';
import { startFakeKube, type FakeKube, type FakeRole } from '../support/fake-kube.js';
import { rpcResult } from '../support/provision-fixtures.js';
import { rolesOfDeployRbac } from '../support/rbac-rules.js';

const NODE = 'sim-node';
const TOKEN = 'abcdef.0123456789abcdef';

async function setup(role: FakeRole, extraArgs: string[] = []): Promise<{ kube: FakeKube; d: TestDaemon }> {
  const kube = await startFakeKube();
  onTestFinished(() => kube.close());
  kube.setToken(TOKEN, role);
  kube.addNode(NODE);
  const dir = await makeTempDir('agentd-cordon-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml(TOKEN));
  const d = await startTestDaemon({
    dir,
    args: ['--sim', '--kubeconfig', kubeconfig, '--machine-name', NODE, ...extraArgs],
  });
  onTestFinished(() => d.dispose());
  expect((await rpcResult<{ state: string }>(d, 'update', { wait: true })).state).toBe('succeeded');
  return { kube, d };
}

const cordoned = async (d: TestDaemon): Promise<boolean | null> =>
  (await rpcResult<{ node: { cordoned: boolean | null } }>(d, 'status')).node.cordoned;

describe('the cordon in status', () => {
  it('follows a cordon and an uncordon made behind agentd’s back', async () => {
    const { kube, d } = await setup(await rolesOfDeployRbac());
    await waitUntil('status to say the node is schedulable', async () => (await cordoned(d)) === false, d);
    kube.patchNode(NODE, { spec: { unschedulable: true } });
    await waitUntil('status to show the cordon', async () => (await cordoned(d)) === true, d);
    kube.patchNode(NODE, { spec: { unschedulable: false } });
    await waitUntil('status to show the uncordon', async () => (await cordoned(d)) === false, d);
    // One watch of the Node, by its name: no polling.
    expect(kube.countRequests({ resource: 'nodes', verb: 'watch' })).toBe(1);
    expect(d.logs()).not.toContain('cannot watch this node');
    const codes = (
      await rpcResult<{ node: { warningDetails: Array<{ code: string }> } }>(d, 'status')
    ).node.warningDetails.map((w) => w.code);
    expect(codes).not.toContain('cordon-unwatched');
  });

  it('follows it with --no-watch too (the Machine watcher off)', async () => {
    const { kube, d } = await setup(await rolesOfDeployRbac(), ['--no-watch']);
    await waitUntil('status to say the node is schedulable', async () => (await cordoned(d)) === false, d);
    kube.patchNode(NODE, { spec: { unschedulable: true } });
    await waitUntil('status to show the cordon', async () => (await cordoned(d)) === true, d);
    expect(kube.countRequests({ resource: 'machines', verb: 'watch' })).toBe(0);
  });

  it('without the right to list and watch nodes: reads the Node once and says why', async () => {
    const rbac = await rolesOfDeployRbac();
    if (rbac === 'admin') throw new Error('deploy/rbac.yaml gave no rules');
    // The ClusterRole before agentd followed the cordon: nodes get and patch only.
    const older: FakeRole = {
      ...rbac,
      rules: rbac.rules.map((r) =>
        r.resources.includes('nodes')
          ? { ...r, verbs: r.verbs.filter((v) => v !== 'list' && v !== 'watch') }
          : r,
      ),
    };
    const { d } = await setup(older);
    await waitUntil('the log to say why', async () => d.logs().includes('cannot watch this node'), d);
    expect(d.logs()).toContain('apply deploy/rbac.yaml');
    // It shows the cordon it read, and says that it may be old.
    const s = await rpcResult<{
      node: { cordoned: boolean | null; warningDetails: Array<{ code: string; message: string }> };
    }>(d, 'status');
    expect(s.node.cordoned).toBe(false);
    expect(s.node.warningDetails).toContainEqual({
      code: 'cordon-unwatched',
      message: `the cordon shown is what agentd last saw: it cannot watch the Node ${NODE} (its ClusterRole lacks list and watch on nodes: apply deploy/rbac.yaml, then restart agentd)`,
    });
  });
});
