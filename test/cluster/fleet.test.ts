/**
 * The fleet gate (docs/fleet.md) with 20 agents and one real kube-apiserver: each agent the real
 * assembly a node runs, in process, on its own simulated host (test/support/fleet-agents.ts),
 * with a bootstrap token of its own (so the audit log tells them apart) and deploy/rbac.yaml's
 * rights; each Node kept Ready by the kubelet stand-in for the health gate. Repaves are asked as
 * the cluster asks them, on the Machines. Short leases (10 s, renewed every second) keep it to
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
  // 10 s leases renewed every second: with 5 s, a run at load average 14 (20 agents in this
  // process beside kube-apiserver, on 2 cores) lost one slot to a renewal late by more than 4 s.
  // Before that, 5 s leases renewed every second. With the fake simulation's 1 s leases, one run of five on
  // a machine at load average 13-16 had 5 nodes down at once under maxConcurrent 3 (not seen
  // again; its slot-lost count was not recorded). A late renewal letting a waiter take a live
  // holder's slot is the documented way to exceed the bound (docs/fleet.md); the test counts
  // lost slots, so a recurrence says which it was.
  fleet: { leaseDurationSeconds: 10, renewIntervalMs: 1_000, recheckIntervalMs: 2_000, wakeJitterMs: 100 },
  watcher: { reconcile: { waitPollMs: 100 } },
};

/** Waits bounded for a loaded 2-core CI machine, where 20 agents and kube-apiserver share it: not speed claims. */
async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 240_000,
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
    const rolloutStart = new Date().toISOString();
    const started = Date.now();
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
    const rolloutSeconds = (Date.now() - started) / 1000;
    // No holder lost its slot (a late renewal, docs/fleet.md), so the bound is exact.
    const lost = await Promise.all(
      agents.map(
        async (a) =>
          (await a.daemon.metrics.registry.getSingleMetric('agentd_fleet_slot_lost_total')?.get())?.values[0]
            ?.value ?? 0,
      ),
    );
    expect(lost.reduce((x, y) => x + y, 0)).toBe(0);
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
    // The measured load (docs/fleet.md, "Load model"): the agents' requests by verb and resource.
    const byKind = new Map<string, number>();
    for (const e of await auditEvents(cp)) {
      if (!users.has(e.user?.username as string) || (e.requestReceivedTimestamp as string) < rolloutStart)
        continue;
      const k = `${e.verb as string} ${e.objectRef?.resource as string}${e.objectRef?.subresource ? `/${e.objectRef.subresource as string}` : ''}`;
      byKind.set(k, (byKind.get(k) ?? 0) + 1);
    }
    console.info(
      `fleet on kube-apiserver: ${NODES} repaves in ${rolloutSeconds.toFixed(1)} s, agents' requests: ${JSON.stringify(Object.fromEntries([...byKind].sort()))}`,
    );
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

  it('halts once the recorded failures reach maxFailures, until an operator resumes', async () => {
    await quiet();
    await policy('maxConcurrent: 3\nmaxFailures: 2\n', (p) => p.maxFailures === 2);
    // Two failures recorded in the state ConfigMap, as failed updates of other nodes leave them.
    const failure = (node: string) => ({
      node,
      operation: `op-${node}`,
      state: 'failed',
      message: 'it failed',
      at: new Date().toISOString(),
    });
    const state = {
      metadata: { name: 'agentd-fleet-state' },
      data: { 'failures.json': JSON.stringify([failure('gone-1'), failure('gone-2')]) },
    };
    const put = await cp.api.request('PUT', `/api/v1/namespaces/${NS}/configmaps/agentd-fleet-state`, state);
    if (put.status === 404 || put.status === 422) {
      await cp.api.request('DELETE', `/api/v1/namespaces/${NS}/configmaps/agentd-fleet-state`);
      await cp.api.create(`/api/v1/namespaces/${NS}/configmaps`, state);
    }
    const a = agents[0] as FleetAgent;
    const n = await repave(a);
    await until('the repave to wait, Halted', async () => (await nodeUpdated(a))?.reason === 'Halted');
    expect((await leases()).filter((l) => l.spec?.holderIdentity)).toEqual([]);
    // Resuming is an operator right (docs/fleet.md, "Pause, halt and resume"): another node's
    // agentd is refused, the failures kept; an operator clears them, and the waiting node goes on.
    await expect((agents[1] as FleetAgent).rpc.call('fleet.resume')).rejects.toMatchObject({
      data: { code: 'PRECONDITION_FAILED', reason: 'OperatorRight' },
    });
    const cleared = await cp.api.request('DELETE', `/api/v1/namespaces/${NS}/configmaps/agentd-fleet-state`);
    expect(cleared.status).toBe(200);
    await until(`${a.name} to acknowledge after resume`, async () => (await acked(a)) === n);
  }, 120_000);
});
