/**
 * The fleet simulation (docs/fleet.md): 20 agents in process, each with its own simulated host
 * (the engine's fake machine manager and provisioner, the real update procedure) and its own fleet
 * runtime (the real policy watch and Lease gate, its own client), against one fake API server.
 * Short leases and polls on the real clock keep it to seconds. It also counts the requests each
 * agent sends: the measured side of the load model in docs/fleet.md.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import type { KubeClients } from '../../src/kube/client.js';
import { createFleetRuntime, type FleetRuntime } from '../../src/fleet/index.js';
import { systemClock } from '../../src/host/clock.js';
import type { MachineName } from '../../src/host/types.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { UPDATE_PHASES, runUpdate, type UpdateOutcome } from '../../src/engine/update.js';
import type { Operation } from '../../src/engine/operation.js';
import { configAt, createEngineFixture, type EngineFixture } from '../unit/engine/fakes.js';
import { startFakeKube, type FakeKube } from '../support/fake-kube.js';

const NS = 'agentd-system';
const NODES = 20;
const logger = pino({ level: 'silent' });
const TIMING = { leaseDurationSeconds: 1, renewIntervalMs: 250, pollIntervalMs: 200 };

interface Agent {
  name: string;
  fleet: FleetRuntime;
  f: EngineFixture;
  active: MachineName;
  updates: number;
  ops: Operation[];
}

describe('fleet simulation: 20 agents, one API server', () => {
  let kube: FakeKube;
  let agents: Agent[];
  /** Nodes between stop and commit right now, and the most seen at once. */
  let down: Set<string>;
  let maxDown: number;
  /** When each node last began to stop its source (wall clock). */
  let stoppedAt: Map<string, number>;

  beforeEach(async () => {
    kube = await startFakeKube();
    down = new Set();
    maxDown = 0;
    stoppedAt = new Map();
    agents = [];
    for (let i = 0; i < NODES; i += 1) {
      const name = `node-${String(i).padStart(2, '0')}`;
      const kc = kube.kubeConfig();
      const clients: Pick<KubeClients, 'kc' | 'core' | 'coordination'> = {
        kc,
        core: kc.makeApiClient(CoreV1Api),
        coordination: kc.makeApiClient(CoordinationV1Api),
      };
      const fleet = createFleetRuntime({
        clients,
        namespace: NS,
        node: name,
        clock: systemClock,
        logger,
        metrics: createMetrics({ version: 't', collectDefaults: false }),
        timing: TIMING,
      });
      const f = await createEngineFixture();
      await f.applied.write('kube1', configAt('1.34.0'));
      f.machines.running.add('kube1');
      f.machines.present.add('kube1');
      // Instrument the down window: from the source's stop to the target's commit.
      const stop = f.machines.stop.bind(f.machines);
      f.machines.stop = async (m, signal) => {
        if (m !== agentOf(name).active) return stop(m, signal);
        down.add(name);
        stoppedAt.set(name, Date.now());
        maxDown = Math.max(maxDown, down.size);
        await stop(m, signal);
      };
      const start = f.machines.start.bind(f.machines);
      f.machines.start = async (m, signal) => {
        await delay(15); // a machine takes a moment to boot: updates overlap
        await start(m, signal);
      };
      const write = f.applied.write.bind(f.applied);
      f.applied.write = async (m, config) => {
        const hash = await write(m, config);
        down.delete(name);
        return hash;
      };
      agents.push({ name, fleet, f, active: 'kube1', updates: 0, ops: [] });
    }
    for (const a of agents) a.fleet.start();
  });
  afterEach(async () => {
    await Promise.all(agents.map((a) => a.fleet.stop()));
    await kube.close();
  });

  const agentOf = (name: string): Agent => agents.find((a) => a.name === name) as Agent;

  /** One repave of `a` through the real update procedure and its fleet gate. */
  async function repave(a: Agent, version: string): Promise<UpdateOutcome> {
    const rec = a.f.recorder(UPDATE_PHASES);
    a.ops.push(rec.op);
    const source = a.active;
    const target: MachineName = source === 'kube1' ? 'kube2' : 'kube1';
    const outcome = await runUpdate(
      { ...a.f.deps, fleet: a.fleet.gate },
      rec,
      { source, target, config: configAt(version), drain: false },
      AbortSignal.timeout(60_000),
    );
    if (outcome.state === 'succeeded') {
      a.active = target;
      a.updates += 1;
    } else {
      down.delete(a.name);
    }
    return outcome;
  }

  const synced = async (): Promise<void> => {
    await expect
      .poll(() => agents.every((a) => a.fleet.policy.state().synced), { timeout: 10_000 })
      .toBe(true);
  };
  const policy = (text: string): void => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': text });
  };
  const policyIs = async (check: (a: Agent) => boolean): Promise<void> => {
    await expect.poll(() => agents.every(check), { timeout: 10_000 }).toBe(true);
  };

  it(
    '60 repaves at once with maxConcurrent 3: never more than 3 nodes down, every node updated once per request',
    { timeout: 120_000 },
    async () => {
      policy('maxConcurrent: 3');
      await synced();
      await policyIs((a) => a.fleet.policy.current()?.maxConcurrent === 3);
      kube.clearRequests();
      const started = Date.now();
      // Three requests per node, all at once; a node runs its own one after the other.
      const outcomes = await Promise.all(
        agents.map(async (a) => {
          const out: UpdateOutcome[] = [];
          for (const v of ['1.35.0', '1.35.1', '1.35.2']) out.push(await repave(a, v));
          return out;
        }),
      );
      const seconds = (Date.now() - started) / 1000;
      expect(outcomes.flat().map((o) => o.state)).toEqual(Array(60).fill('succeeded'));
      expect(agents.map((a) => a.updates)).toEqual(Array(NODES).fill(3));
      expect(maxDown).toBeGreaterThan(1); // the gate let updates overlap…
      expect(maxDown).toBeLessThanOrEqual(3); // …but never more than maxConcurrent
      // Every update went through the gate and freed its slot.
      for (const a of agents) {
        for (const op of a.ops) expect(op.phases.find((p) => p.name === 'slot')?.state).toBe('succeeded');
      }
      expect(kube.listLeases(NS).map((l) => l.spec?.holderIdentity)).toEqual(['', '', '']);

      // The measured load (docs/fleet.md, "Load model").
      const count = (resource: string, verb: string): number => kube.countRequests({ resource, verb });
      const load = {
        seconds,
        leaseList: count('leases', 'list'),
        leaseCreate: count('leases', 'create'),
        leaseUpdate: count('leases', 'update'),
        stateGet: count('configmaps', 'get'),
        total: kube.requests.length,
      };
      console.info(`fleet simulation load: ${JSON.stringify(load)} for 60 updates by ${NODES} agents`);
      // Bounded: each poll of a waiting agent is one state read and one lease list.
      expect(load.leaseList).toBeLessThanOrEqual(load.stateGet);
    },
  );

  it(
    'a holder killed mid-update has its slot taken over once the lease expires',
    { timeout: 60_000 },
    async () => {
      policy('maxConcurrent: 1');
      await synced();
      await policyIs((a) => a.fleet.policy.current()?.maxConcurrent === 1);
      const [dead, ...rest] = agents as [Agent, ...Agent[]];
      const held = await dead.fleet.gate.acquire({
        signal: AbortSignal.timeout(5000),
        operationId: 'dead-op',
        onWait: () => {},
      });
      expect(held?.name).toBe('agentd-slot-0');
      await dead.fleet.stop(); // killed: no more renewals, no release
      const killedAt = Date.now();
      const outs = await Promise.all(rest.slice(0, 3).map((a) => repave(a, '1.35.0')));
      expect(outs.map((o) => o.state)).toEqual(['succeeded', 'succeeded', 'succeeded']);
      // Not before the 1 s lease ran out (seen unchanged that long by the taker).
      const firstStop = Math.min(...rest.slice(0, 3).map((a) => stoppedAt.get(a.name) ?? 0));
      expect(firstStop).toBeGreaterThanOrEqual(killedAt + 900);
      expect(kube.getLease(NS, 'agentd-slot-0')?.spec?.leaseTransitions).toBeGreaterThanOrEqual(1);
    },
  );

  it('paused holds: waiting updates stop nothing until resume', async () => {
    policy('# operators keep notes here\nmaxConcurrent: 3\npaused: true\n');
    await synced();
    await policyIs((a) => a.fleet.policy.current()?.paused === true);
    const some = agents.slice(0, 5);
    const running = some.map((a) => repave(a, '1.35.0'));
    await expect
      .poll(() => some.every((a) => a.ops[0]?.wait?.reason === 'Paused'), { timeout: 10_000 })
      .toBe(true);
    await delay(500);
    expect(some.flatMap((a) => a.f.log.calls).filter((c) => c.startsWith('stop'))).toEqual([]);
    expect(kube.listLeases(NS)).toEqual([]);
    const r = await agents[10]?.fleet.control.resume();
    expect(r?.status.paused).toBe(false);
    // The edit keeps what the operator wrote.
    expect(
      (kube.getConfigMap(NS, 'agentd-fleet') as unknown as { data: Record<string, string> }).data[
        'policy.yaml'
      ],
    ).toContain('# operators keep notes here');
    expect((await Promise.all(running)).map((o) => o.state)).toEqual(Array(5).fill('succeeded'));
  });

  it('maxFailures halts the rollout until an operator resumes', async () => {
    policy('maxConcurrent: 2\nmaxFailures: 2');
    await synced();
    await policyIs((a) => a.fleet.policy.current()?.maxFailures === 2);
    const [bad1, bad2, ...good] = agents as [Agent, Agent, ...Agent[]];
    bad1.f.log.fail('verify kube2');
    bad2.f.log.fail('verify kube2');
    const failed = await Promise.all([repave(bad1, '1.35.0'), repave(bad2, '1.35.0')]);
    expect(failed.map((o) => o.state)).toEqual(['rolled_back', 'rolled_back']);
    const later = good.slice(0, 4);
    const running = later.map((a) => repave(a, '1.35.0'));
    await expect
      .poll(() => later.every((a) => a.ops[0]?.wait?.reason === 'Halted'), { timeout: 10_000 })
      .toBe(true);
    expect(later.flatMap((a) => a.f.log.calls).filter((c) => c.startsWith('stop'))).toEqual([]);
    const status = await later[0]?.fleet.control.status();
    expect(status).toMatchObject({ halted: true });
    expect(status?.failures.map((f) => f.node).sort()).toEqual([bad1.name, bad2.name]);
    const r = await agents[19]?.fleet.control.resume();
    expect(r?.clearedFailures).toBe(2);
    expect((await Promise.all(running)).map((o) => o.state)).toEqual(Array(4).fill('succeeded'));
  });
});
