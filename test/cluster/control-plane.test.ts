/**
 * The control-plane harness itself (test/support/control-plane/): what it starts answers as a
 * cluster does — deploy/ applied with kubectl, the CRD Established, the bootstrap token
 * authenticated as system:bootstrappers, PodDisruptionBudgets given status by the real disruption
 * controller, pods run by the kubelet stand-in — and nothing it started outlives it, also when
 * the process that started it is SIGKILLed.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { controlPlaneAvailable, startControlPlane } from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { waitUntil } from '../support/daemon.js';

/** Running (a zombie, killed and not yet reaped by whoever inherited it, is not). */
const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

describe.skipIf(!controlPlaneAvailable())('the real control plane', () => {
  const cp = useControlPlane();

  it('has deploy/ applied: the CRD Established, the ClusterRole, Role and bindings accepted', async () => {
    const crd = await cp().api.get(
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.unbounded-cloud.io',
    );
    expect(crd.status.conditions).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'Established', status: 'True' })]),
    );
    await cp().api.get('/apis/rbac.authorization.k8s.io/v1/clusterroles/agentd');
    await cp().api.get('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/agentd');
    await cp().api.get('/apis/rbac.authorization.k8s.io/v1/namespaces/agentd-system/roles/agentd-fleet');
  });

  it('authenticates the bootstrap token as system:bootstrappers, authorized by RBAC', async () => {
    const agent = cp().tokenClient(cp().bootstrapToken.token);
    const review = await agent.create('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'SelfSubjectReview',
    });
    expect(review.status.userInfo.username).toBe(`system:bootstrap:${cp().bootstrapToken.id}`);
    expect(review.status.userInfo.groups).toContain('system:bootstrappers');
    expect((await agent.request('GET', '/apis/unbounded-cloud.io/v1alpha3/machines')).status).toBe(200);
    // Not granted by deploy/rbac.yaml: refused by the real authorizer.
    const secrets = await agent.request('GET', '/api/v1/namespaces/kube-system/secrets');
    expect(secrets.status).toBe(403);
    expect((await cp().tokenClient('abcdef.0000000000000000').request('GET', '/api/v1/nodes')).status).toBe(
      401,
    );
  });

  it('runs pods on the stand-in’s nodes and gives a PodDisruptionBudget real status', async () => {
    const { api, kubelet } = cp();
    await kubelet.addNode('harness-node');
    await api.create('/api/v1/namespaces', { metadata: { name: 'harness' } });
    await api.create('/api/v1/namespaces/harness/pods', {
      metadata: { name: 'p1', labels: { app: 'a' } },
      spec: { nodeName: 'harness-node', containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });
    await api.create('/apis/policy/v1/namespaces/harness/poddisruptionbudgets', {
      metadata: { name: 'pdb' },
      spec: { minAvailable: 1, selector: { matchLabels: { app: 'a' } } },
    });
    await waitUntil('the pod Running and Ready', async () => {
      const pod = await api.get('/api/v1/namespaces/harness/pods/p1');
      return pod.status.phase === 'Running';
    });
    await waitUntil('the PDB observed with 1 healthy pod', async () => {
      const pdb = await api.get('/apis/policy/v1/namespaces/harness/poddisruptionbudgets/pdb');
      return pdb.status?.observedGeneration === pdb.metadata.generation && pdb.status?.currentHealthy === 1;
    });
    const pdb = await api.get('/apis/policy/v1/namespaces/harness/poddisruptionbudgets/pdb');
    expect(pdb.status.disruptionsAllowed).toBe(0);
    // A terminating pod on its node is finished by the stand-in.
    await api.request('DELETE', '/api/v1/namespaces/harness/pods/p1');
    await waitUntil(
      'the deleted pod gone',
      async () => (await api.request('GET', '/api/v1/namespaces/harness/pods/p1')).status === 404,
    );
    const node = await api.get('/api/v1/nodes/harness-node');
    expect(node.status.conditions).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'Ready', status: 'True' })]),
    );
  });

  it('leaves no process and no temp dir behind when stopped', async () => {
    const other = await startControlPlane({ deploy: false });
    const pids = [other.etcd.process.pid, other.apiServer.process().pid, other.controllerManager?.pid ?? 0];
    expect(pids.every(alive)).toBe(true);
    await other.stop();
    expect(pids.filter(alive)).toEqual([]);
    expect(existsSync(other.dir)).toBe(false);
  });

  it('leaves no process and no temp dir behind when the test process is SIGKILLed', async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        fileURLToPath(new URL('../support/control-plane/harness-child.ts', import.meta.url)),
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`the harness child exited ${code} before it started`)));
    });
    const { pids, dir } = JSON.parse(line) as { pids: number[]; dir: string };
    expect(pids.every(alive)).toBe(true);
    child.kill('SIGKILL');
    await waitUntil('the reaper to kill etcd, kube-apiserver and kube-controller-manager', () =>
      pids.every((p) => !alive(p)),
    );
    await waitUntil('the reaper to remove the temp dir', () => !existsSync(dir));
  });
});
