// Why the fake API server (test/support/fake-kube): no fault: 60 repaves with 1 s leases in seconds and every request counted per agent; test/cluster/fleet.test.ts runs the fleet against kube-apiserver.
/**
 * The fleet simulation (docs/fleet.md): 20 agents in process, each the real assembly a node runs
 * (`startDaemon`: the engine, the Machine watcher, the fleet runtime) on its own simulated host
 * under its own temp `--root`, against one fake API server over real HTTP. Repaves are requested
 * as the cluster requests them: by bumping `spec.operations.repaveCounter` of each node's Machine.
 *
 * Why 20 nodes × 3 repaves rather than 60 nodes × 1: 60 in-process daemons spent most of the
 * two cores on their own idle watch traffic and took over a minute; 20 keep the test to seconds
 * while still making 60 repaves contend for 3 slots. A node's three requests cannot all be made at
 * the same instant — bumps made while a repave runs coalesce into one follow-up by design
 * (docs/watcher.md) — so every node is asked at once, and each node is asked again the moment its
 * previous repave is acknowledged: 20 requests at once, 60 in all, each applied exactly once.
 *
 * "Down" is measured on each simulated host (test/support/fleet-agents.ts): from the moment it is
 * asked to stop kubelet in the serving machine until the old machine is removed or restarted.
 * The fake API server counts every request per agent: the measured side of the load model.
 * Short leases (1 s) on the real clock keep it fast: about 40 s alone on 2 shared cores (the 60
 * repaves themselves 20 s; ~36 s of CPU). In `npm test` it shares the cores with the other
 * workers and the real-host suite and has taken 180 s: the deadlines below are sized for that
 * (`SLOW`), and a deadline only bounds a failure, it never makes a passing run longer. The
 * scenarios share one fleet and run in order; each starts from a quiet fleet (no update running,
 * every slot free).
 */
import { rm } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMirror, type Mirror } from '../../src/sim/mirror/index.js';
import { startFakeKube, type FakeKube, type KubeObject } from '../support/fake-kube.js';
import {
  createJoinedTemplate,
  DownCounter,
  startFleetAgent,
  type FleetAgent,
} from '../support/fleet-agents.js';

const NS = 'agentd-system';
/** How much slower than alone the busiest full `npm test` run may make the simulation. */
const SLOW = 5;
const NODES = 20;
const TIMING = {
  // A 1 s lease renewed every 250 ms; a waiter woken by a release tries within 100 ms; the
  // safety re-check (which also ends a halt after resume) every 2 s.
  fleet: { leaseDurationSeconds: 1, renewIntervalMs: 250, recheckIntervalMs: 2_000, wakeJitterMs: 100 },
  // The Machine's condition follows the operation's wait within 100 ms (default 2 s).
  watcher: { reconcile: { waitPollMs: 100 } },
};

interface Condition {
  type: string;
  status: string;
  reason?: string;
}

describe('fleet simulation: 20 agents, one API server', () => {
  let kube: FakeKube;
  let mirror: Mirror;
  let template: string;
  let agents: FleetAgent[] = [];
  const counter = new DownCounter();

  beforeAll(async () => {
    kube = await startFakeKube();
    mirror = await startMirror({ logger: pino({ level: 'silent' }) });
    template = await createJoinedTemplate(mirror);
    const names = Array.from({ length: NODES }, (_, i) => `node-${String(i).padStart(2, '0')}`);
    // Each node's kubelet registered its Node, Ready at the joined version: the health gate's nodeReady.
    for (const name of names) kube.addNode(name, { ready: true, kubeletVersion: 'v1.34.0' });
    agents = await Promise.all(
      names.map((name) => startFleetAgent({ template, name, kube, counter, timing: TIMING })),
    );
    // Every watcher registered its Machine (the repave requests go there).
    await until('every Machine registered', () => agents.every((a) => kube.getMachine(a.name)));
  }, 30_000 * SLOW);

  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await mirror?.close();
    await kube?.close();
    if (template) await rm(template, { recursive: true, force: true });
  }, 60_000);

  const machine = (a: FleetAgent): KubeObject | undefined => kube.getMachine(a.name);
  const acked = (a: FleetAgent): number =>
    (machine(a)?.status?.operations as { repaveCounter?: number } | undefined)?.repaveCounter ?? 0;
  const nodeUpdated = (a: FleetAgent): Condition | undefined =>
    ((machine(a)?.status?.conditions ?? []) as Condition[]).find((c) => c.type === 'NodeUpdated');
  const requested = (a: FleetAgent): number =>
    (machine(a)?.spec?.operations as { repaveCounter?: number } | undefined)?.repaveCounter ?? 0;
  /** Ask for one more repave, as the cluster does. */
  const repave = (a: FleetAgent): number => {
    const n = requested(a) + 1;
    kube.patchMachineSpecAsOtherWriter(a.name, { operations: { repaveCounter: n } });
    return n;
  };
  const policy = async (text: string, check: (p: Record<string, unknown>) => boolean): Promise<void> => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': text });
    await until('every agent to hold the new policy', async () => {
      const all = await Promise.all(agents.filter((a) => !a.frozen).map((a) => a.rpc.call('fleet.status')));
      return all.every((s) => s.policy !== null && check(s.policy as unknown as Record<string, unknown>));
    });
  };
  const watcherUpdates = async (a: FleetAgent) =>
    (await a.rpc.call('operations.list', { limit: 100 })).operations
      .filter((op) => op.kind === 'update' && op.requestedBy === 'watcher')
      .reverse();
  const heldSlots = (): string[] =>
    kube
      .listLeases(NS)
      .map((l) => l.spec?.holderIdentity as string)
      .filter((h) => h !== '');
  const quiet = async (): Promise<void> => {
    await until('a quiet fleet', async () => {
      const ops = await Promise.all(agents.filter((a) => !a.frozen).map((a) => a.rpc.call('status')));
      return ops.every((s) => s.operation === null) && heldSlots().length === 0;
    });
  };

  it(
    '60 repaves with maxConcurrent 3: never more than 3 nodes down, every requested repave applied once',
    { timeout: 80_000 * SLOW },
    async () => {
      await policy('maxConcurrent: 3\nhealthChecks: {nodeReadyTimeoutSeconds: 10}\n', (p) => {
        return p.maxConcurrent === 3;
      });
      kube.clearRequests();
      const started = Date.now();
      // Every node asked at once; each asked again as soon as its last repave is acknowledged.
      await Promise.all(
        agents.map(async (a) => {
          for (let i = 0; i < 3; i += 1) {
            const n = repave(a);
            await until(`${a.name} to acknowledge repave ${n}`, () => acked(a) === n, 70_000 * SLOW);
          }
        }),
      );
      const seconds = (Date.now() - started) / 1000;

      expect(counter.max).toBeGreaterThan(1); // the gate let repaves overlap…
      expect(counter.max).toBeLessThanOrEqual(3); // …but never more than maxConcurrent
      for (const a of agents) {
        const ups = await watcherUpdates(a);
        // Exactly one update per request, each forced (a repave) and through the gate.
        expect(ups.map((u) => [u.state, u.idempotencyKey?.split('/').pop()])).toEqual([
          ['succeeded', 'repave-1'],
          ['succeeded', 'repave-2'],
          ['succeeded', 'repave-3'],
        ]);
        for (const u of ups) {
          expect(u.phases.find((p) => p.name === 'slot')?.state).toBe('succeeded');
          expect(u.phases.find((p) => p.name === 'health')?.state).toBe('succeeded');
        }
        expect(machine(a)?.status?.phase).toBe('Joining');
        expect(nodeUpdated(a)).toMatchObject({ status: 'True', reason: 'Succeeded' });
        // kube1 → kube2 → kube1 → kube2.
        expect((await a.rpc.call('status')).node.activeMachine).toBe('kube2');
      }
      await quiet();
      expect(kube.listLeases(NS).map((l) => l.metadata.name)).toEqual([
        'agentd-slot-0',
        'agentd-slot-1',
        'agentd-slot-2',
      ]);

      // The measured load (docs/fleet.md, "Load model").
      const count = (resource: string, verb: string): number => kube.countRequests({ resource, verb });
      const perAgent = agents.map((a) => kube.requests.filter((r) => r.user === a.name).length);
      const load = {
        seconds,
        total: kube.requests.length,
        perAgentMax: Math.max(...perAgent),
        leaseList: count('leases', 'list'),
        leaseWatch: count('leases', 'watch'),
        leaseGet: count('leases', 'get'),
        leaseCreate: count('leases', 'create'),
        leaseUpdate: count('leases', 'update'),
        // Lost races for a slot: what a release costs beyond the winner's write.
        leaseConflicts: kube.requests.filter((r) => r.resource === 'leases' && r.status === 409).length,
        configMapGet: count('configmaps', 'get'),
        nodeGet: count('nodes', 'get'),
        machineGet: count('machines', 'get'),
        machineStatusPatch: count('machines/status', 'patch'),
      };
      console.info(`fleet simulation load: ${JSON.stringify(load)} for 60 repaves by ${NODES} agents`);
      // Every request came from an agent, and each was one of the agents' requests.
      expect(perAgent.reduce((s, n) => s + n, 0)).toBe(load.total);
      // One Node read per update that passed the health gate (nodeReady), no more.
      expect(load.nodeGet).toBeGreaterThanOrEqual(60);
    },
  );

  it('paused holds: asked repaves stop nothing until resume', { timeout: 30_000 * SLOW }, async () => {
    await quiet();
    await policy('# operators keep notes here\nmaxConcurrent: 3\npaused: true\n', (p) => p.paused === true);
    const some = agents.slice(0, 5);
    const since = Date.now();
    const asked = some.map((a) => [a, repave(a)] as const);
    // The wait shows on the operation and on the Machine's condition.
    await until('the repaves to wait, Paused', () =>
      some.every((a) => nodeUpdated(a)?.status === 'False' && nodeUpdated(a)?.reason === 'Paused'),
    );
    for (const a of some) expect((await a.rpc.call('status')).operation?.wait?.reason).toBe('Paused');
    // An edit that keeps the pause wakes every waiting gate: each looks again (a counted
    // decision) and still waits, no node goes down and no slot is taken.
    const looks = async (a: FleetAgent): Promise<number> =>
      (await a.daemon.metrics.fleetGateDecisions.get()).values.find(
        (v) => v.labels.result === 'wait' && v.labels.reason === 'Paused',
      )?.value ?? 0;
    const before = await Promise.all(some.map(looks));
    await policy(
      '# operators keep notes here\nmaxConcurrent: 4\npaused: true\n',
      (p) => p.maxConcurrent === 4,
    );
    await until('every paused gate to look again', async () =>
      (await Promise.all(some.map(looks))).every((n, i) => n > (before[i] ?? 0)),
    );
    expect(some.filter((a) => (counter.wentDownAt.get(a.name) ?? 0) >= since)).toEqual([]);
    expect(heldSlots()).toEqual([]);
    const r = await agents[10]?.rpc.call('fleet.resume');
    expect(r?.status.paused).toBe(false);
    // The edit keeps what the operator wrote.
    expect(kube.getConfigMap(NS, 'agentd-fleet')?.data).toMatchObject({
      'policy.yaml': expect.stringContaining('# operators keep notes here'),
    });
    for (const [a, n] of asked) await until(`${a.name} to acknowledge`, () => acked(a) === n);
  });

  it('maxFailures halts the rollout until an operator resumes', { timeout: 30_000 * SLOW }, async () => {
    await quiet();
    await policy(
      'maxConcurrent: 2\nmaxFailures: 2\nhealthChecks: {nodeReadyTimeoutSeconds: 1}\n',
      (p) => p.maxFailures === 2,
    );
    const [bad1, bad2] = agents.slice(5, 7) as [FleetAgent, FleetAgent];
    // Their new kubelets never turn Ready: the health gate fails, the repaves roll back.
    for (const a of [bad1, bad2]) kube.setNodeStatus(a.name, { ready: false });
    for (const a of [bad1, bad2]) repave(a);
    await until('both repaves to roll back', () =>
      [bad1, bad2].every((a) => machine(a)?.status?.phase === 'Failed'),
    );
    for (const a of [bad1, bad2]) expect((await watcherUpdates(a)).at(-1)?.state).toBe('rolled_back');
    const later = agents.slice(7, 11);
    const since = Date.now();
    const asked = later.map((a) => [a, repave(a)] as const);
    await until('the repaves to wait, Halted', () => later.every((a) => nodeUpdated(a)?.reason === 'Halted'));
    expect(later.filter((a) => (counter.wentDownAt.get(a.name) ?? 0) >= since)).toEqual([]);
    const status = await later[0]?.rpc.call('fleet.status');
    expect(status).toMatchObject({ halted: true });
    expect(status?.failures.map((f) => f.node).sort()).toEqual([bad1.name, bad2.name]);
    const r = await agents[19]?.rpc.call('fleet.resume');
    expect(r?.clearedFailures).toBe(2);
    for (const [a, n] of asked) await until(`${a.name} to acknowledge`, () => acked(a) === n);
    for (const a of [bad1, bad2]) kube.setNodeStatus(a.name, { ready: true });
  });

  it(
    'a holder killed mid-update has its slot taken over once the lease expires',
    { timeout: 30_000 * SLOW },
    async () => {
      await quiet();
      await policy('maxConcurrent: 1\nhealthChecks: {nodeReadyTimeoutSeconds: 10}\n', (p) => {
        return p.maxConcurrent === 1;
      });
      const [dead, ...rest] = agents.slice(11, 15) as [FleetAgent, ...FleetAgent[]];
      const before = kube.getLease(NS, 'agentd-slot-0')?.spec?.leaseTransitions as number;
      // Killed between stop and commit: its host stops answering, its API requests are refused.
      dead.freezeWhenDown();
      repave(dead);
      await until(`${dead.name} to be killed mid-update`, () => dead.frozen);
      const killedAt = Date.now();
      expect(kube.getLease(NS, 'agentd-slot-0')?.spec?.holderIdentity).toBe(dead.name);
      const asked = rest.map((a) => [a, repave(a)] as const);
      for (const [a, n] of asked)
        await until(`${a.name} to acknowledge`, () => acked(a) === n, 15_000 * SLOW);
      // Not before the 1 s lease ran out (and was seen unchanged that long by the taker).
      const firstDown = Math.min(...rest.map((a) => counter.wentDownAt.get(a.name) ?? 0));
      expect(firstDown).toBeGreaterThanOrEqual(killedAt + 900);
      expect(kube.getLease(NS, 'agentd-slot-0')?.spec?.leaseTransitions).toBeGreaterThan(before);
      // The dead node is still down: it never came back.
      expect(counter.down.has(dead.name)).toBe(true);
    },
  );
});

/** Poll `probe` (every 50 ms) until it holds, or fail naming `what`. */
async function until(what: string, probe: () => unknown, timeoutMs = 10_000 * SLOW): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(50);
  }
}
