/**
 * `drain` and `uncordon` (docs/watcher.md, "Drain") against a real kube-apiserver, with the real
 * disruption controller giving PodDisruptionBudgets their status and the Eviction API deciding:
 * agentd on a node (its own identity, system:node:<name>, from a kubeconfig; deploy/ applied), its Node
 * and pods kept by the kubelet stand-in.
 */
import { describe, expect, it } from 'vitest';
import { waitUntil } from '../support/daemon.js';
import { startClusterAgent, type ClusterAgent } from '../support/control-plane/agent.js';
import { auditEvents } from '../support/control-plane/audit.js';
import { nodeIdentity } from '../support/control-plane/identity.js';
import { controlPlaneAvailable, type KubeJson } from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { rpcResult } from '../support/provision-fixtures.js';

const MARK = 'agentd.unbounded-cloud.io/cordoned-by-agentd';

interface Op {
  id: string;
  state: string;
  result: KubeJson | null;
  error: { code: string; message: string } | null;
}

describe.skipIf(!controlPlaneAvailable())('drain and uncordon against kube-apiserver', () => {
  const cp = useControlPlane({ apiServer: { audit: true } });
  let n = 0;

  /** A Node (kept Ready by the stand-in), a namespace for its pods, and agentd on it. */
  async function node(o: { unschedulable?: boolean } = {}): Promise<{ a: ClusterAgent; ns: string }> {
    const name = `drain-${++n}`;
    await cp().kubelet.addNode(name, o);
    await cp().api.create('/api/v1/namespaces', { metadata: { name } });
    // Its own identity (system:node:<name>): the Node authorizer and NodeRestriction give it its
    // Node and the eviction of its pods (docs/watcher.md, "Least privilege"); a bootstrap token
    // may not drain.
    const identity = await nodeIdentity(cp(), name);
    const a = await startClusterAgent(cp(), { name, kubeconfig: identity.kubeconfig });
    return { a, ns: name };
  }

  const pod = (ns: string, nodeName: string, name: string, extra: KubeJson = {}): Promise<KubeJson> =>
    cp().api.create(`/api/v1/namespaces/${ns}/pods`, {
      metadata: {
        name,
        labels: { app: 'web' },
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'ReplicaSet',
            name: 'web',
            uid: '00000000-0000-0000-0000-000000000001',
            controller: true,
          },
        ],
        ...(extra.metadata ?? {}),
      },
      spec: {
        nodeName,
        containers: [{ name: 'c', image: 'example.invalid/none' }],
        terminationGracePeriodSeconds: 30,
      },
    });
  const podGone = async (ns: string, name: string): Promise<boolean> =>
    (await cp().api.request('GET', `/api/v1/namespaces/${ns}/pods/${name}`)).status === 404;
  const running = async (ns: string, name: string): Promise<boolean> =>
    (await cp().api.get(`/api/v1/namespaces/${ns}/pods/${name}`)).status?.phase === 'Running';
  const nodeObject = (name: string): Promise<KubeJson> => cp().api.get(`/api/v1/nodes/${name}`);

  it('cordons, is refused with 429 while the PodDisruptionBudget allows nothing, and evicts once it allows one', async () => {
    const { a, ns } = await node();
    await pod(ns, a.name, 'web-1');
    await cp().api.create(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`, {
      metadata: { name: 'web' },
      spec: { minAvailable: 1, selector: { matchLabels: { app: 'web' } } },
    });
    await waitUntil('the pod running', () => running(ns, 'web-1'));
    await waitUntil('the disruption controller to observe the PDB', async () => {
      const pdb = await cp().api.get(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/web`);
      return pdb.status?.observedGeneration === pdb.metadata.generation && pdb.status?.currentHealthy === 1;
    });

    const started = await rpcResult<Op>(a.d, 'drain', { timeoutSeconds: 120 });
    await waitUntil('the node cordoned by agentd', async () => {
      const node = await nodeObject(a.name);
      return node.spec?.unschedulable === true && node.metadata.annotations?.[MARK] === 'true';
    });
    const evictions = async (code: number): Promise<number> =>
      (await auditEvents(cp(), `system:node:${a.name}`)).filter(
        (e) =>
          e.objectRef?.subresource === 'eviction' &&
          e.objectRef?.name === 'web-1' &&
          e.responseStatus?.code === code,
      ).length;
    await waitUntil('an eviction refused with 429', async () => (await evictions(429)) > 0, a.d);
    expect(await running(ns, 'web-1')).toBe(true);

    // The budget now allows one disruption; the controller says so, and the next retry evicts.
    await cp().api.mergePatch(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/web`, {
      spec: { minAvailable: 0 },
    });
    await waitUntil(
      'the drain to end',
      async () => (await rpcResult<Op>(a.d, 'operations.get', { id: started.id })).state !== 'running',
      a.d,
    );
    const op = await rpcResult<Op>(a.d, 'operations.get', { id: started.id });
    expect(op).toMatchObject({
      state: 'succeeded',
      result: { evicted: [{ namespace: ns, name: 'web-1' }], remaining: [] },
    });
    expect(await evictions(201)).toBe(1);
    expect(await podGone(ns, 'web-1')).toBe(true);

    const un = await rpcResult<Op>(a.d, 'uncordon', { wait: true });
    expect(un.result).toEqual({ uncordoned: true, outcome: 'uncordoned' });
    const after = await nodeObject(a.name);
    expect(after.spec?.unschedulable ?? false).toBe(false);
    expect(after.metadata.annotations?.[MARK]).toBeUndefined();
  });

  it('skips DaemonSet and mirror pods, and leaves an operator’s earlier cordon in place', async () => {
    const { a, ns } = await node({ unschedulable: true });
    await pod(ns, a.name, 'api-1');
    await cp().api.create(`/api/v1/namespaces/${ns}/pods`, {
      metadata: {
        name: 'agent-x',
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'DaemonSet',
            name: 'agent',
            uid: '00000000-0000-0000-0000-000000000002',
            controller: true,
          },
        ],
      },
      spec: { nodeName: a.name, containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });
    const nodeUid = (await nodeObject(a.name)).metadata.uid as string;
    await cp().api.create(`/api/v1/namespaces/${ns}/pods`, {
      metadata: {
        name: `static-${a.name}`,
        annotations: { 'kubernetes.io/config.mirror': 'mirror', 'kubernetes.io/config.source': 'file' },
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: a.name, uid: nodeUid, controller: true }],
      },
      spec: { nodeName: a.name, containers: [{ name: 'c', image: 'example.invalid/none' }] },
    });
    for (const p of ['api-1', 'agent-x', `static-${a.name}`])
      await waitUntil(`${p} running`, () => running(ns, p));

    const op = await rpcResult<Op>(a.d, 'drain', { ignoreDaemonSets: true, wait: true });
    expect(op).toMatchObject({
      state: 'succeeded',
      result: { alreadyCordoned: true, evicted: [{ namespace: ns, name: 'api-1' }], remaining: [] },
    });
    expect(((op.result?.skipped ?? []) as KubeJson[]).map((p) => p.name).sort()).toEqual([
      'agent-x',
      `static-${a.name}`,
    ]);
    await waitUntil('the evicted pod gone', () => podGone(ns, 'api-1'));
    expect(await running(ns, 'agent-x')).toBe(true);
    expect((await nodeObject(a.name)).metadata.annotations?.[MARK]).toBeUndefined();

    const un = await rpcResult<Op>(a.d, 'uncordon', { wait: true });
    expect(un.result).toEqual({ uncordoned: false, outcome: 'cordoned-by-other' });
    expect((await nodeObject(a.name)).spec?.unschedulable).toBe(true);
  });
});
