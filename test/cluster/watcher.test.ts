/**
 * The Machine watcher (docs/watcher.md) against a real kube-apiserver: agentd on a node
 * (`--sim`, credentials from the applied config: the control plane's CA and a bootstrap token,
 * RBAC from deploy/rbac.yaml), driven by changing its Machine as another controller would.
 */
import { describe, expect, it } from 'vitest';
import { waitUntil, type TestDaemon } from '../support/daemon.js';
import { machinePath, startClusterAgent, type ClusterAgent } from '../support/control-plane/agent.js';
import { controlPlaneAvailable, type KubeJson } from '../support/control-plane/index.js';
import { auditEvents, bootstrapUser } from '../support/control-plane/audit.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { metricValue, rpcResult } from '../support/provision-fixtures.js';

interface Op {
  id: string;
  kind: string;
  state: string;
  requestedBy: string;
  idempotencyKey: string | null;
}

const nodeUpdated = (m: KubeJson | null): KubeJson | undefined =>
  ((m?.status?.conditions ?? []) as KubeJson[]).find((c) => c.type === 'NodeUpdated');
const acked = (m: KubeJson | null): number =>
  (m?.status?.operations?.repaveCounter as number | undefined) ?? 0;

const gone = (d: TestDaemon): Promise<number> => metricValue(d, 'agentd_watch_restarts_total{reason="gone"}');
const reconciles = (d: TestDaemon): Promise<number> =>
  metricValue(d, 'agentd_reconcile_total{result="success"}');

async function watcherUpdates(d: TestDaemon): Promise<Op[]> {
  const { operations } = await rpcResult<{ operations: Op[] }>(d, 'operations.list', { limit: 100 });
  return operations.filter((op) => op.kind === 'update' && op.requestedBy === 'watcher');
}

describe.skipIf(!controlPlaneAvailable())('the Machine watcher against kube-apiserver', () => {
  const cp = useControlPlane({ apiServer: { audit: true } });
  let n = 0;
  const agent = (o: Partial<Parameters<typeof startClusterAgent>[1]> = {}): Promise<ClusterAgent> =>
    startClusterAgent(cp(), { name: `watch-${++n}`, ...o });
  const bump = (name: string, counter: number): Promise<KubeJson> =>
    cp().api.mergePatch(machinePath(name), { spec: { operations: { repaveCounter: counter } } });

  it('registers its missing Machine with the bootstrap token reference, the labels and the version', async () => {
    const a = await agent({ labels: { 'unbounded-cloud.io/site': 'lab-1' } });
    await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
    const m = await a.machine();
    expect(m?.spec.kubernetes).toEqual({
      version: 'v1.34.0',
      bootstrapTokenRef: { name: `bootstrap-token-${cp().bootstrapToken.id}` },
      nodeLabels: { 'unbounded-cloud.io/site': 'lab-1' },
    });
    // Nothing agentd sent was pruned, and it sent nothing else.
    expect(Object.keys(m?.spec ?? {})).toEqual(['kubernetes']);
    const status = await rpcResult<{ watcher: KubeJson }>(a.d, 'status');
    expect(status.watcher).toMatchObject({
      enabled: true,
      connected: true,
      machineName: a.name,
      lastError: null,
    });
  });

  it('acknowledges a repave exactly once', async () => {
    const a = await agent();
    await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
    await bump(a.name, 1);
    await waitUntil('the repave to be acknowledged', async () => acked(await a.machine()) === 1, a.d);
    const m = await a.machine();
    expect(m?.status.phase).toBe('Joining');
    expect(nodeUpdated(m)).toMatchObject({
      status: 'True',
      reason: 'Succeeded',
      observedGeneration: m?.metadata.generation,
    });
    const updates = await watcherUpdates(a.d);
    expect(updates.map((u) => [u.state, u.idempotencyKey])).toEqual([
      ['succeeded', `machine/${m?.metadata.uid}/gen-${m?.metadata.generation}/repave-1`],
    ]);
    // Its own status writes woke the watch (real events): none of them started another update.
    const reconciles = await metricValue(a.d, 'agentd_reconcile_total{result="success"}');
    await cp().api.mergePatch(machinePath(a.name), { metadata: { labels: { poke: '1' } } });
    await waitUntil(
      'the poke to be reconciled',
      async () => (await metricValue(a.d, 'agentd_reconcile_total{result="success"}')) > reconciles,
      a.d,
    );
    expect(await watcherUpdates(a.d)).toHaveLength(1);
    // Every status write went to the status subresource as a merge patch.
    const writes = (await auditEvents(cp(), bootstrapUser(cp()))).filter(
      (e) =>
        e.objectRef?.resource === 'machines' &&
        e.objectRef?.name === a.name &&
        ['patch', 'update'].includes(e.verb as string),
    );
    expect(writes.length).toBeGreaterThan(0);
    expect(writes.every((e) => e.objectRef.subresource === 'status' && e.verb === 'patch')).toBe(true);
  });

  it('keeps a concurrent status writer’s fields through real 409s, and acknowledges once', async () => {
    const a = await agent();
    await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
    // Another controller rewrites the status (full updates with the resourceVersion it read) in a
    // tight loop, moving status.operations.rebootCounter and a condition of its own.
    let stop = false;
    let otherWrites = 0;
    const other = (async () => {
      while (!stop) {
        const cur = await cp().api.get(`${machinePath(a.name)}`);
        const conditions = ((cur.status?.conditions ?? []) as KubeJson[]).filter((c) => c.type !== 'Other');
        conditions.push({
          type: 'Other',
          status: 'True',
          reason: 'Writing',
          message: `${otherWrites}`,
          lastTransitionTime: new Date().toISOString(),
        });
        cur.status = {
          ...(cur.status ?? {}),
          operations: { ...(cur.status?.operations ?? {}), rebootCounter: otherWrites + 1 },
          conditions,
        };
        const res = await cp().api.request('PUT', `${machinePath(a.name)}/status`, cur);
        if (res.status === 200) otherWrites++;
      }
    })();
    // A conflict needs the other writer to land between agentd's read and its write: that is
    // likely on every repave, not certain, so repave again (at most 5 times) until one was seen.
    const conflictsSeen = async () =>
      (await auditEvents(cp(), bootstrapUser(cp()))).filter(
        (e) =>
          e.objectRef?.name === a.name &&
          e.objectRef?.subresource === 'status' &&
          e.responseStatus?.code === 409,
      ).length;
    let repaves = 0;
    try {
      do {
        repaves += 1;
        await bump(a.name, repaves);
        await waitUntil(
          `repave ${repaves} to be acknowledged`,
          async () => acked(await a.machine()) === repaves,
          a.d,
        );
      } while (repaves < 5 && (await conflictsSeen()) === 0);
    } finally {
      stop = true;
      await other;
    }
    const m = await a.machine();
    expect(m?.status.operations.rebootCounter).toBe(otherWrites);
    expect(((m?.status.conditions ?? []) as KubeJson[]).map((c) => c.type).sort()).toEqual([
      'LastOperation',
      'NodeRunning',
      'NodeUpdated',
      'Other',
    ]);
    expect(nodeUpdated(m)).toMatchObject({ status: 'True', reason: 'Succeeded' });
    // Each repave acknowledged once: one update per counter value, however many conflicts.
    expect(await watcherUpdates(a.d)).toHaveLength(repaves);
    expect(await conflictsSeen()).toBeGreaterThan(0);
  });

  it('resumes its watch after kube-apiserver is killed and started again mid-watch', async () => {
    const a = await agent();
    await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
    await waitUntil('a reconcile', async () => (await reconciles(a.d)) > 0, a.d);
    // A write the Machine watch does not see: the restarted server's watch cache starts past the
    // version the watch resumes from, and answers it with 410 (too old resource version).
    await cp().api.create('/api/v1/namespaces/default/configmaps', { metadata: { generateName: 'rev-' } });
    await cp().apiServer.kill();
    await waitUntil(
      'the watcher to see the connection lost',
      async () => !(await rpcResult<{ watcher: { connected: boolean } }>(a.d, 'status')).watcher.connected,
      a.d,
    );
    await cp().apiServer.start();
    await waitUntil('the 410 of the resumed watch', async () => (await gone(a.d)) > 0, a.d);
    await bump(a.name, 1);
    await waitUntil(
      'the repave after the restart to be acknowledged',
      async () => acked(await a.machine()) === 1,
      a.d,
    );
    expect(await watcherUpdates(a.d)).toHaveLength(1);
    expect(await metricValue(a.d, 'agentd_watch_restarts_total{reason="error"}')).toBeGreaterThan(0);
    // One 410 and one list: the list's version is the collection's, newer than the watch cache's
    // start. (A read of the Machine gave its own version, gone again at once: list, watch, 410,
    // hundreds of times a second until the Machine changed.)
    expect(await gone(a.d)).toBe(1);
  });

  it('lists the Machine again after a 410 Gone, once: its version was compacted away while kube-apiserver was down', async () => {
    const a = await agent();
    await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
    // Writes the Machine watch does not see move etcd's revision past the watch's version…
    for (let i = 0; i < 5; i++) {
      await cp().api.create('/api/v1/namespaces/default/configmaps', { metadata: { generateName: 'rev-' } });
    }
    // …and compaction removes everything before it; the restarted server's watch cache starts there.
    await cp().apiServer.kill();
    await cp().etcd.compact();
    await cp().apiServer.start();
    await waitUntil('a 410 to restart the watch', async () => (await gone(a.d)) > 0, a.d);
    await bump(a.name, 1);
    await waitUntil('the repave to be acknowledged', async () => acked(await a.machine()) === 1, a.d);
    expect(await watcherUpdates(a.d)).toHaveLength(1);
    expect(await gone(a.d)).toBe(1);
  });

  it('resumes watches a TCP proxy cuts, and repaves once', async () => {
    const proxy = await cp().proxy();
    const a = await agent({ server: proxy.url });
    await waitUntil('the Machine to be registered', async () => (await a.machine()) !== null, a.d);
    const before = proxy.accepted();
    expect(proxy.cutAll()).toBeGreaterThan(0);
    await waitUntil(
      'agentd to connect again',
      async () => proxy.accepted() > before && proxy.open() > 0,
      a.d,
    );
    await bump(a.name, 1);
    await waitUntil('the repave to be acknowledged', async () => acked(await a.machine()) === 1, a.d);
    proxy.cutAll();
    await bump(a.name, 2);
    await waitUntil('the second repave to be acknowledged', async () => acked(await a.machine()) === 2, a.d);
    expect((await watcherUpdates(a.d)).map((u) => u.state)).toEqual(['succeeded', 'succeeded']);
  });
});
