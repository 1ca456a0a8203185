/**
 * The Machine watcher on real systemd (docs/watcher.md): a node with a cluster (the fake API
 * server in the host's network namespace, agentd reaching it through a kubeconfig) registers its
 * Machine at the join; a repave request made in the cluster then becomes a real blue/green update,
 * kube1 → kube2, and the Machine's status says so. The same flow on the simulated host is
 * test/integration/watcher-repave.test.ts; here the update, its machines and kubelet are real.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNode, type OperationJson } from '../support/real-host/assert-node.js';
import { startJoinedNode, type ClusterAccess, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

/** The Machine's name: the suite's agent config's `MachineName`. */
const NAME = 'worker-01';
const MACHINE = `/apis/unbounded-cloud.io/v1alpha3/machines/${NAME}`;

interface MachineJson {
  metadata: { uid: string; generation: number };
  spec: { kubernetes?: { version?: string }; operations?: { repaveCounter?: number } };
  status?: {
    phase?: string;
    operations?: { repaveCounter?: number };
    conditions?: { type: string; status: string; reason?: string; observedGeneration?: number }[];
  };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe.skipIf(!requireRealHost())(
  'the Machine watcher on a real systemd host',
  { timeout: 240_000 },
  () => {
    let node: RealNode;
    let cluster: ClusterAccess;

    const machine = async (): Promise<MachineJson | undefined> => {
      const res = await cluster.request<MachineJson>('GET', MACHINE);
      return res.status === 200 ? res.body : undefined;
    };

    beforeAll(async () => {
      node = await startJoinedNode({ label: 'watcher', cluster: true });
      cluster = node.cluster as ClusterAccess;
    }, 600_000);

    afterAll(async () => {
      await node?.stop();
    }, 120_000);

    it('connects after the join and registers the node’s Machine', async () => {
      await until(
        'the watcher to connect',
        async () => {
          const s = await node.agentctlJson<{ watcher: { connected: boolean } }>(['status']);
          return s.watcher.connected ? true : undefined;
        },
        30_000,
      );
      const m = await until('the Machine to exist', machine, 10_000);
      expect(m.spec.kubernetes?.version).toBe('v1.34.0');
    });

    it('turns a repave request into a blue/green update on the real host', async () => {
      const before = await until('the Machine', machine, 10_000);
      const patched = await cluster.request('PATCH', MACHINE, { spec: { operations: { repaveCounter: 1 } } });
      expect(patched.status).toBe(200);

      const done = await until(
        'the repave to be acknowledged',
        async () => {
          const m = await machine();
          return m?.status?.operations?.repaveCounter === 1 ? m : undefined;
        },
        180_000,
      );
      expect(done.status?.conditions?.find((c) => c.type === 'NodeUpdated')).toMatchObject({
        status: 'True',
        reason: 'Succeeded',
        observedGeneration: before.metadata.generation + 1,
      });
      expect(done.status?.phase).toBe('Joining');

      // The real machines: kube2 runs with a healthy kubelet, kube1 and its files are gone.
      await expectNode(node, { active: 'kube2', version: '1.34.0' });
      type Op = OperationJson & { requestedBy: string; idempotencyKey: string | null };
      const { operations } = await node.agentctlJson<{ operations: Op[] }>([
        'rpc',
        'operations.list',
        '{"limit":10}',
      ]);
      const repave = operations.find((op) => op.kind === 'update' && op.requestedBy === 'watcher');
      expect(repave).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube2' });
      expect(repave?.idempotencyKey).toBe(
        `machine/${before.metadata.uid}/gen-${before.metadata.generation + 1}/repave-1`,
      );
    });
  },
);
