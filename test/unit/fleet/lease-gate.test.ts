// Why the fake API server (test/support/fake-kube): a slot watch cut and a failing list at chosen moments, with requests counted per test; test/cluster/fleet.test.ts runs the gate against kube-apiserver.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { createFleetObjects, type FleetObjects } from '../../../src/kube/fleet-objects.js';
import { createFleetState } from '../../../src/fleet/fleet-state.js';
import {
  createLeaseGate,
  type GateWait,
  type LeaseGate,
  type LeaseGateOptions,
} from '../../../src/fleet/lease-gate.js';
import type { FleetPolicySource } from '../../../src/fleet/policy-watch.js';
import { parsePolicy, type FleetPolicy } from '../../../src/fleet/policy.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { startFakeKube, type FakeKube } from '../../support/fake-kube.js';
import { createManualClock, type ManualClock } from '../../support/manual-clock.js';

const NS = 'agentd-system';
const logger = pino({ level: 'silent' });

function source(policy: FleetPolicy | null): FleetPolicySource & { set(p: FleetPolicy | null): void } {
  let p = policy;
  return {
    set: (next) => {
      p = next;
    },
    current: () => p,
    state: () => ({
      synced: true,
      present: p !== null,
      policy: p,
      error: null,
      errorField: null,
      resourceVersion: null,
    }),
  };
}

describe('the fleet lease gate', () => {
  let kube: FakeKube;
  let objects: FleetObjects;
  let clock: ManualClock;
  const gates: LeaseGate[] = [];

  beforeEach(async () => {
    kube = await startFakeKube();
    const kc = kube.kubeConfig();
    objects = createFleetObjects({
      kc,
      core: kc.makeApiClient(CoreV1Api),
      coordination: kc.makeApiClient(CoordinationV1Api),
      namespace: NS,
    });
    clock = createManualClock();
  });
  afterEach(async () => {
    for (const g of gates.splice(0)) g.stop();
    await kube.close();
  });

  function gate(
    node: string,
    policy: FleetPolicySource,
    metrics = createMetrics({ version: 't', collectDefaults: false }),
    timing: Partial<LeaseGateOptions> = {},
  ) {
    const g = createLeaseGate({
      objects,
      policy,
      state: createFleetState({ objects, clock }),
      node,
      clock,
      logger,
      metrics,
      leaseDurationSeconds: 60,
      renewIntervalMs: 20_000,
      recheckIntervalMs: 10_000,
      random: () => 0,
      ...timing,
    });
    gates.push(g);
    return g;
  }

  const holderOf = (i: number): unknown => kube.getLease(NS, `agentd-slot-${i}`)?.spec?.holderIdentity;

  it('is no gate at all without a policy: no Lease is read or written', async () => {
    const g = gate('n1', source(null));
    const onWait = vi.fn();
    expect(await g.acquire({ signal: new AbortController().signal, operationId: 'op', onWait })).toBeNull();
    expect(onWait).not.toHaveBeenCalled();
    expect(kube.countRequests({ resource: 'leases' })).toBe(0);
  });

  it('lets maxConcurrent nodes hold a slot; the next waits for a release', async () => {
    const p = source(parsePolicy('maxConcurrent: 2'));
    const a = await gate('a', p).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'oa',
      onWait: () => {},
    });
    const b = await gate('b', p).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'ob',
      onWait: () => {},
    });
    expect(new Set([holderOf(0), holderOf(1)])).toEqual(new Set(['a', 'b']));
    const waits: Array<GateWait | null> = [];
    const c = gate('c', p).acquire({
      signal: new AbortController().signal,
      operationId: 'oc',
      onWait: (w) => waits.push(w),
    });
    await vi.waitFor(() => expect(waits[0]?.reason).toBe('WaitingForSlot'));
    await a?.release({ state: 'succeeded', operationId: 'oa', message: null });
    await vi.waitFor(async () => {
      await clock.advance(10_000);
      expect(new Set([holderOf(0), holderOf(1)])).toEqual(new Set(['b', 'c']));
    });
    const held = await c;
    expect(held?.name).toMatch(/^agentd-slot-[01]$/);
    expect(waits.at(-1)).toBeNull();
    await b?.release({ state: 'succeeded', operationId: 'ob', message: null });
    await held?.release({ state: 'succeeded', operationId: 'oc', message: null });
    expect([holderOf(0), holderOf(1)]).toEqual(['', '']);
  });

  it('takes a slot at its release event, without polling: waiting costs no request', async () => {
    const p = source(parsePolicy('maxConcurrent: 1'));
    const a = await gate('a', p).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'oa',
      onWait: () => {},
    });
    const waits: Array<GateWait | null> = [];
    // Its safety re-check is an hour away: only an event can wake it.
    const b = gate('b', p, undefined, { recheckIntervalMs: 3_600_000 }).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'ob',
      onWait: (w) => waits.push(w),
    });
    await vi.waitFor(() => expect(waits[0]?.reason).toBe('WaitingForSlot'));
    await kube.whenWatching(1);
    const before = kube.requests.length;
    // The holder renews twice: the waiter is told (its watch), but a renewal frees nothing.
    // Time moves only while both sleep (the holder's renewal, the waiter's timer): a move made
    // before the holder slept again would start its next 20 s from the new time.
    for (const n of [1, 2]) {
      await vi.waitFor(() => expect(clock.pending).toBe(2));
      await clock.advance(20_000);
      await vi.waitFor(() =>
        expect(kube.countRequests({ resource: 'leases', verb: 'update' })).toBeGreaterThanOrEqual(n),
      );
    }
    const byWaiter = kube.requests
      .slice(before)
      .filter((r) => !(r.verb === 'update' && r.name === 'agentd-slot-0'));
    expect(byWaiter).toEqual([]);
    // The release wakes it: the slot is taken with no clock moving (no poll, no timer).
    await a?.release({ state: 'succeeded', operationId: 'oa', message: null });
    const held = await b;
    expect(held?.name).toBe('agentd-slot-0');
    expect(holderOf(0)).toBe('b');
    expect(waits.at(-1)).toBeNull();
    // Once it holds its slot it watches no more: an idle agent keeps only its policy watch.
    await vi.waitFor(() => expect(kube.openWatches).toBe(0));
    await held?.release({ state: 'succeeded', operationId: 'ob', message: null });
  });

  it('times a dead holder: takes its slot at its expiry, not at the next re-check', async () => {
    const p = source(parsePolicy('maxConcurrent: 1'));
    const deadGate = gate('dead', p);
    await deadGate.acquire({ signal: AbortSignal.timeout(5000), operationId: 'o1', onWait: () => {} });
    deadGate.stop();
    const waits: GateWait[] = [];
    const g = createLeaseGate({
      objects,
      policy: p,
      state: createFleetState({ objects, clock }),
      node: 'next',
      clock,
      logger,
      metrics: createMetrics({ version: 't', collectDefaults: false }),
      leaseDurationSeconds: 60,
      recheckIntervalMs: 3_600_000, // an hour: only the expiry timer can explain a takeover
      random: () => 0,
    });
    gates.push(g);
    const next = g.acquire({
      signal: new AbortController().signal,
      operationId: 'o2',
      onWait: (w) => w && waits.push(w),
    });
    await vi.waitFor(() => expect(waits[0]?.reason).toBe('WaitingForSlot'));
    await kube.whenWatching(1);
    await clock.advance(59_000);
    expect(holderOf(0)).toBe('dead');
    await clock.advance(2_000);
    expect((await next)?.name).toBe('agentd-slot-0');
    expect(holderOf(0)).toBe('next');
  });

  it('keeps waiting through a failed slot watch: lists again after the backoff', async () => {
    const p = source(parsePolicy('maxConcurrent: 1'));
    const a = await gate('a', p).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'oa',
      onWait: () => {},
    });
    const waits: GateWait[] = [];
    const b = gate('b', p).acquire({
      signal: AbortSignal.timeout(10_000),
      operationId: 'ob',
      onWait: (w) => w && waits.push(w),
    });
    await kube.whenWatching(1);
    const lists = kube.countRequests({ resource: 'leases', verb: 'list' });
    kube.failNext(1, { status: 500, match: { resource: 'leases', verb: 'list' } });
    kube.cutWatches();
    // The re-list fails (500); the next one, after the backoff, succeeds and watches again.
    await vi.waitFor(async () => {
      await clock.advance(1_000);
      expect(kube.countRequests({ resource: 'leases', verb: 'list' })).toBeGreaterThanOrEqual(lists + 2);
      expect(kube.openWatches).toBe(1);
    });
    await a?.release({ state: 'succeeded', operationId: 'oa', message: null });
    expect((await b)?.name).toBe('agentd-slot-0');
  });

  it('takes a slot an older agentd wrote without the slot label, and labels it', async () => {
    kube.putLease(NS, {
      metadata: { name: 'agentd-slot-0', namespace: NS },
      spec: { holderIdentity: '', leaseDurationSeconds: 60 },
    });
    const held = await gate('n1', source(parsePolicy('{}'))).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'o1',
      onWait: () => {},
    });
    expect(held?.name).toBe('agentd-slot-0');
    expect(kube.getLease(NS, 'agentd-slot-0')?.metadata.labels).toEqual({
      'app.kubernetes.io/component': 'agentd-fleet-slot',
    });
  });

  it('lists a slot an older agentd wrote without the slot label, and only slots', async () => {
    kube.putLease(NS, {
      metadata: { name: 'agentd-slot-1', namespace: NS },
      spec: { holderIdentity: 'old-node', leaseDurationSeconds: 60 },
    });
    kube.putLease(NS, { metadata: { name: 'something-else', namespace: NS }, spec: { holderIdentity: 'x' } });
    const slots = await gate('n1', source(parsePolicy('{}'))).slots();
    expect(slots.map((s) => [s.name, s.holder])).toEqual([['agentd-slot-1', 'old-node']]);
  });

  it('says why it waits: paused, halted by recorded failures, outside every window', async () => {
    const p = source(parsePolicy('paused: true'));
    const waits: GateWait[] = [];
    const ac = new AbortController();
    const pending = gate('n1', p).acquire({
      signal: ac.signal,
      operationId: 'o',
      onWait: (w) => w && waits.push(w),
    });
    await vi.waitFor(() => expect(waits.at(-1)?.reason).toBe('Paused'));
    // Wednesday 12:00 UTC: a Saturday window is closed.
    p.set(parsePolicy('windows: [{days: [Sat], start: "01:00", end: "02:00", timeZone: UTC}]'));
    await vi.waitFor(async () => {
      await clock.advance(10_000);
      expect(waits.at(-1)?.reason).toBe('OutsideWindow');
    });
    expect(waits.at(-1)?.message).toContain('2026-11-28T01:00:00.000Z');
    const state = createFleetState({ objects, clock });
    for (const n of ['x', 'y'])
      await state.record({ node: n, operation: 'o', state: 'failed', message: 'm', at: 't' });
    p.set(parsePolicy('maxFailures: 2'));
    await vi.waitFor(async () => {
      await clock.advance(10_000);
      expect(waits.at(-1)?.reason).toBe('Halted');
    });
    expect(waits.at(-1)?.message).toMatch(/2 recorded failures reach maxFailures 2 \(x, y\)/);
    expect(kube.listLeases(NS)).toEqual([]);
    ac.abort();
    await expect(pending).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('a halted waiter goes on as soon as resume clears the failures, not at the re-check', async () => {
    const state = createFleetState({ objects, clock });
    for (const n of ['x', 'y'])
      await state.record({ node: n, operation: 'o', state: 'failed', message: 'm', at: 't' });
    const p = source(parsePolicy('maxFailures: 2'));
    const waits: Array<GateWait | null> = [];
    // The safety re-check is an hour away: only the watch of the failures can wake it.
    const pending = gate('n1', p, undefined, { recheckIntervalMs: 3_600_000 }).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'o',
      onWait: (w) => waits.push(w),
    });
    await vi.waitFor(() => expect(waits.at(-1)?.reason).toBe('Halted'));
    await vi.waitFor(() => expect(kube.countRequests({ resource: 'configmaps', verb: 'watch' })).toBe(1));
    // Another failure recorded while halted wakes it too; it looks again and stays halted.
    await state.record({ node: 'z', operation: 'o', state: 'failed', message: 'm', at: 't' });
    await vi.waitFor(() => expect(waits.at(-1)?.message).toMatch(/3 recorded failures/));
    // The server ends the watches (as it does every few minutes): it looks again and watches anew.
    const watchesBefore = kube.countRequests({ resource: 'configmaps', verb: 'watch' });
    kube.cutWatches();
    await vi.waitFor(() =>
      expect(kube.countRequests({ resource: 'configmaps', verb: 'watch' })).toBeGreaterThan(watchesBefore),
    );
    expect(await state.clear()).toBe(3);
    const held = await pending;
    expect(held?.name).toBe('agentd-slot-0');
    expect(waits.at(-1)).toBeNull();
    // No watch is left behind once it goes on.
    await vi.waitFor(() => expect(kube.openWatches).toBe(0));
    await held?.release({ state: 'succeeded', operationId: 'o', message: null });
  });

  it('records a failed update in the fleet state', async () => {
    const p = source(parsePolicy('{}'));
    const held = await gate('n1', p).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'o1',
      onWait: () => {},
    });
    await held?.release({
      state: 'rolled_back',
      operationId: 'o1',
      message: 'VERIFY_FAILED: kubelet inactive',
    });
    const failures = JSON.parse(
      String(
        (kube.getConfigMap(NS, 'agentd-fleet-state') as { data?: Record<string, string> }).data?.[
          'failures.json'
        ],
      ),
    ) as unknown;
    expect(failures).toEqual([
      expect.objectContaining({
        node: 'n1',
        operation: 'o1',
        state: 'rolled_back',
        message: 'VERIFY_FAILED: kubelet inactive',
      }),
    ]);
    expect(holderOf(0)).toBe('');
  });

  it('renews a held slot; a dead holder loses it to a waiter once the lease expired', async () => {
    const p = source(parsePolicy('{}'));
    const deadGate = gate('dead', p);
    const held = await deadGate.acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'o1',
      onWait: () => {},
    });
    const renewTime = kube.getLease(NS, 'agentd-slot-0')?.spec?.renewTime;
    await clock.advance(20_000);
    await vi.waitFor(() => expect(kube.getLease(NS, 'agentd-slot-0')?.spec?.renewTime).not.toBe(renewTime));
    deadGate.stop(); // the holder dies: no more renewals
    const waits: GateWait[] = [];
    const next = gate('next', p).acquire({
      signal: new AbortController().signal,
      operationId: 'o2',
      onWait: (w) => w && waits.push(w),
    });
    await vi.waitFor(() => expect(waits[0]?.reason).toBe('WaitingForSlot'));
    // Not before 60 s: still held.
    await clock.advance(50_000);
    expect(holderOf(0)).toBe('dead');
    await vi.waitFor(async () => {
      await clock.advance(10_000);
      expect(holderOf(0)).toBe('next');
    });
    expect((await next)?.name).toBe('agentd-slot-0');
    expect(kube.getLease(NS, 'agentd-slot-0')?.spec?.leaseTransitions).toBe(1);
    expect(held?.lostReason()).toBeNull(); // it stopped renewing: it never saw the takeover
  });

  it('notices when another node holds its slot, and then leaves the slot alone', async () => {
    const metrics = createMetrics({ version: 't', collectDefaults: false });
    const held = await gate('n1', source(parsePolicy('{}')), metrics).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'o1',
      onWait: () => {},
    });
    const l = await objects.getLease('agentd-slot-0');
    await objects.replaceLease('agentd-slot-0', l?.resourceVersion ?? '', {
      holder: 'intruder',
      durationSeconds: 60,
      acquireTimeMs: clock.now(),
      renewTimeMs: clock.now(),
      transitions: 1,
    });
    await vi.waitFor(async () => {
      await clock.advance(20_000);
      expect(held?.lostReason()).toMatch(/held by intruder/);
    });
    expect(
      (await metrics.registry.getSingleMetric('agentd_fleet_slot_lost_total')?.get())?.values[0]?.value,
    ).toBe(1);
    await held?.release({ state: 'succeeded', operationId: 'o1', message: null });
    expect(holderOf(0)).toBe('intruder');
  });

  it('keeps the slot for settleSeconds after a success', async () => {
    const held = await gate('n1', source(parsePolicy('settleSeconds: 45'))).acquire({
      signal: AbortSignal.timeout(5000),
      operationId: 'o1',
      onWait: () => {},
    });
    await held?.release({ state: 'succeeded', operationId: 'o1', message: null });
    expect(holderOf(0)).toBe('n1');
    await clock.advance(40_000);
    expect(holderOf(0)).toBe('n1');
    await vi.waitFor(async () => {
      await clock.advance(5_000);
      expect(holderOf(0)).toBe('');
    });
  });
});
