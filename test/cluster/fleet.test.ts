/**
 * The fleet gate (docs/fleet.md) with 20 agents and one real kube-apiserver: each agent the real
 * assembly a node runs, in process, on its own simulated host (test/support/fleet-agents.ts),
 * with a bootstrap token of its own (so the audit log tells them apart) and deploy/rbac.yaml's
 * rights; each Node kept Ready by the kubelet stand-in for the health gate. Repaves are asked as
 * the cluster asks them, on the Machines. Short leases (1 s, renewed every 250 ms) keep it to
 * seconds. The scenarios share the fleet and run in order, each from a quiet fleet.
 */
import { rm } from 'node:fs/promises';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMirror, type Mirror } from '../../src/sim/mirror/index.js';
import { machinePath } from '../support/control-plane/agent.js';
import { auditEvents } from '../support/control-plane/audit.js';
import {
  controlPlaneAvailable,
  startControlPlane,
  type ControlPlane,
  type KubeJson,
} from '../support/control-plane/index.js';
import {
  createJoinedTemplate,
  DownCounter,
  startFleetAgent,
  type FleetAgent,
  type FleetAgentIdentities,
} from '../support/fleet-agents.js';

const NS = 'agentd-system';
const NODES = 20;
const TIMING = {
  fleet: { leaseDurationSeconds: 1, renewIntervalMs: 250, recheckIntervalMs: 2_000, wakeJitterMs: 100 },
  watcher: { reconcile: { waitPollMs: 100 } },
};

async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!controlPlaneAvailable())('the fleet gate: 20 agents, one real kube-apiserver', () => {
  let cp: ControlPlane;
  let mirror: Mirror;
  let template: string;
  let agents: FleetAgent[] = [];
  const users = new Map<string, string>();
  const counter = new DownCounter();

  beforeAll(async () => {
    cp = await startControlPlane({ apiServer: { audit: true } });
    mirror = await startMirror({ logger: pino({ level: 'silent' }) });
    template = await createJoinedTemplate(mirror);
    const identities: FleetAgentIdentities = {
      async identity(name) {
        const t = await cp.createBootstrapToken();
        users.set(`system:bootstrap:${t.id}`, name);
        // The Machine that names this token (deploy/node-restriction.yaml ties a token to it), as
        // a Machine controller makes it: the agent's applied config carries the template's token,
        // so its self-registration would name that one and be refused.
        await cp.api.create('/apis/unbounded-cloud.io/v1alpha3/machines', {
          apiVersion: 'unbounded-cloud.io/v1alpha3',
          kind: 'Machine',
          metadata: { name },
          spec: { kubernetes: { bootstrapTokenRef: { name: `bootstrap-token-${t.id}` } } },
        });
        return {
          kubeconfig: cp.tokenKubeconfig(t.token),
          // A frozen node: its token is gone, so it renews nothing.
          revoke: () =>
            void cp.api.request('DELETE', `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${t.id}`),
        };
      },
    };
    const names = Array.from({ length: NODES }, (_, i) => `node-${String(i).padStart(2, '0')}`);
    for (const name of names) await cp.kubelet.addNode(name);
    agents = await Promise.all(
      names.map((name) => startFleetAgent({ template, name, identities, counter, timing: TIMING })),
    );
    await until('every Machine registered', async () => {
      const list = await cp.api.get('/apis/unbounded-cloud.io/v1alpha3/machines');
      return (list.items as KubeJson[]).length === NODES;
    });
  }, 240_000);

  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await mirror?.close();
    await cp?.stop();
    if (template) await rm(template, { recursive: true, force: true });
  }, 120_000);

  const machine = (a: FleetAgent): Promise<KubeJson> => cp.api.get(machinePath(a.name));
  const acked = async (a: FleetAgent): Promise<number> =>
    (await machine(a)).status?.operations?.repaveCounter ?? 0;
  const nodeUpdated = async (a: FleetAgent): Promise<KubeJson | undefined> =>
    ((await machine(a)).status?.conditions as KubeJson[] | undefined)?.find((c) => c.type === 'NodeUpdated');
  const repave = async (a: FleetAgent): Promise<number> => {
    const n = ((await machine(a)).spec?.operations?.repaveCounter ?? 0) + 1;
    await cp.api.mergePatch(machinePath(a.name), { spec: { operations: { repaveCounter: n } } });
    return n;
  };
  const policy = async (text: string, check: (p: KubeJson) => boolean): Promise<void> => {
    const res = await cp.api.request(
      'PATCH',
      `/api/v1/namespaces/${NS}/configmaps/agentd-fleet`,
      { data: { 'policy.yaml': text } },
      'application/merge-patch+json',
    );
    if (res.status === 404) {
      await cp.api.create(`/api/v1/namespaces/${NS}/configmaps`, {
        metadata: { name: 'agentd-fleet' },
        data: { 'policy.yaml': text },
      });
    }
    await until('every agent to hold the new policy', async () => {
      const all = await Promise.all(agents.filter((a) => !a.frozen).map((a) => a.rpc.call('fleet.status')));
      return all.every((s) => s.policy !== null && check(s.policy as unknown as KubeJson));
    });
  };
  const leases = async (): Promise<KubeJson[]> =>
    (await cp.api.get(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`)).items as KubeJson[];
  const quiet = async (): Promise<void> => {
    await until('a quiet fleet', async () => {
      const ops = await Promise.all(agents.filter((a) => !a.frozen).map((a) => a.rpc.call('status')));
      return ops.every((s) => s.operation === null) && (await leases()).every((l) => !l.spec?.holderIdentity);
    });
  };

  it('rolls out 20 repaves with maxConcurrent 3: never more than 3 down, and every Lease write conditional', async () => {
    await policy(
      'maxConcurrent: 3\nhealthChecks: {nodeReadyTimeoutSeconds: 10}\n',
      (p) => p.maxConcurrent === 3,
    );
    // The slots' holders as the watch sees them: never more than 3 at once.
    const holders = new Map<string, string>();
    let maxHeld = 0;
    const watch = cp.api.watch(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases?watch=true`, (e) => {
      holders.set(e.object.metadata.name as string, (e.object.spec?.holderIdentity as string) ?? '');
      maxHeld = Math.max(maxHeld, [...holders.values()].filter((h) => h !== '').length);
    });
    try {
      await Promise.all(
        agents.map(async (a) => {
          const n = await repave(a);
          await until(`${a.name} to acknowledge repave ${n}`, async () => (await acked(a)) === n);
        }),
      );
    } finally {
      watch.stop();
    }
    expect(counter.max).toBeGreaterThan(1);
    expect(counter.max).toBeLessThanOrEqual(3);
    expect(maxHeld).toBeLessThanOrEqual(3);
    for (const a of agents) {
      const ups = (await a.rpc.call('operations.list', { limit: 100 })).operations.filter(
        (op) => op.kind === 'update' && op.requestedBy === 'watcher',
      );
      expect(ups.map((u) => u.state)).toEqual(['succeeded']);
      expect(ups[0]?.phases.find((p) => p.name === 'slot')?.state).toBe('succeeded');
      expect(ups[0]?.phases.find((p) => p.name === 'health')?.state).toBe('succeeded');
    }
    await quiet();
    expect((await leases()).map((l) => l.metadata.name).sort()).toEqual([
      'agentd-slot-0',
      'agentd-slot-1',
      'agentd-slot-2',
    ]);
    // Every Lease write by an agent named the resourceVersion it read (the Lease strategy refuses
    // unconditional updates), and none was refused for anything but a lost race.
    const writes = (await auditEvents(cp)).filter(
      (e) =>
        users.has(e.user?.username as string) &&
        e.objectRef?.resource === 'leases' &&
        ['update', 'patch', 'create'].includes(e.verb as string),
    );
    expect(writes.length).toBeGreaterThan(NODES);
    const updates = writes.filter((e) => e.verb !== 'create');
    expect(
      updates.filter((e) => !e.requestObject?.metadata?.resourceVersion).map((e) => e.requestObject),
    ).toEqual([]);
    expect(
      writes
        .filter((e) => ![200, 201, 409].includes(e.responseStatus?.code as number))
        .map((e) => e.responseStatus),
    ).toEqual([]);
    expect(writes.filter((e) => e.verb === 'patch')).toEqual([]);
  }, 300_000);

  it('pauses and resumes through the ConfigMap: a paused fleet takes no slot', async () => {
    await quiet();
    await policy('maxConcurrent: 3\npaused: true\n', (p) => p.paused === true);
    const some = agents.slice(0, 3);
    const asked = await Promise.all(some.map(async (a) => [a, await repave(a)] as const));
    await until('the repaves to wait, Paused', async () =>
      (await Promise.all(some.map(nodeUpdated))).every(
        (c) => c?.status === 'False' && c?.reason === 'Paused',
      ),
    );
    expect((await leases()).filter((l) => l.spec?.holderIdentity)).toEqual([]);
    expect(counter.down.size).toBe(0);
    await policy('maxConcurrent: 3\npaused: false\n', (p) => p.paused === false);
    for (const [a, n] of asked)
      await until(`${a.name} to acknowledge after resume`, async () => (await acked(a)) === n);
  }, 180_000);

  it('takes over a killed holder’s slot once its Lease expired', async () => {
    await quiet();
    await policy('maxConcurrent: 1\n', (p) => p.maxConcurrent === 1);
    const [dead, next] = [agents[NODES - 1] as FleetAgent, agents[NODES - 2] as FleetAgent];
    dead.freezeWhenDown();
    await repave(dead);
    await until('the holder to be killed while down', () => dead.frozen);
    const held = (await leases()).find((l) => l.spec?.holderIdentity === dead.name);
    expect(held).toBeDefined();
    const n = await repave(next);
    await until(
      `${next.name} to take the dead holder's slot and repave`,
      async () => (await acked(next)) === n,
    );
    const after = (await leases()).find((l) => l.metadata.name === held?.metadata.name);
    expect(after?.spec?.leaseTransitions ?? 0).toBeGreaterThan(held?.spec?.leaseTransitions ?? 0);
    expect(after?.spec?.holderIdentity).not.toBe(dead.name);
  }, 180_000);
});
