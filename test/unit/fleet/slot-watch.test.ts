// Why the fake API server (test/support/fake-kube): slot watches cut, a compaction (410) and a failing list at chosen moments.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { createFleetObjects, type FleetObjects } from '../../../src/kube/fleet-objects.js';
import { createSlotWatch, type SlotWatch } from '../../../src/fleet/slot-watch.js';
import { startFakeKube, type FakeKube } from '../../support/fake-kube.js';
import { createManualClock, type ManualClock } from '../../support/manual-clock.js';

const NS = 'agentd-system';
const spec = (holder: string | null, renewTimeMs: number) => ({
  holder,
  durationSeconds: 60,
  acquireTimeMs: 0,
  renewTimeMs,
  transitions: 0,
});

/** Whether `p` settles within `ms` of real time. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
}

describe('the slot watch', () => {
  let kube: FakeKube;
  let objects: FleetObjects;
  let clock: ManualClock;
  let watch: SlotWatch;

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
    watch = createSlotWatch({ objects, clock, logger: pino({ level: 'silent' }) });
  });
  afterEach(async () => {
    await watch.stop();
    await kube.close();
  });

  it('watches only while used; wakes at a holder change, not at a renewal', async () => {
    expect(watch.snapshot()).toBeNull();
    const unuse = watch.use();
    await expect.poll(() => watch.snapshot()).not.toBeNull();
    await expect.poll(() => kube.openWatches).toBe(1);

    const ac = new AbortController();
    let woken = watch.next(ac.signal);
    const created = await objects.createLease('agentd-slot-0', spec('a', 1000));
    expect(await settlesWithin(woken, 2000)).toBe(true);
    await expect.poll(() => watch.snapshot()?.get('agentd-slot-0')?.lease.holder).toBe('a');

    woken = watch.next(ac.signal);
    const renewed = await objects.replaceLease('agentd-slot-0', created.resourceVersion, spec('a', 2000));
    // The renewal reaches the view (its renewTime), but wakes nobody.
    await expect.poll(() => watch.snapshot()?.get('agentd-slot-0')?.lease.renewTimeMs).toBe(2000);
    expect(await settlesWithin(woken, 300)).toBe(false);

    await objects.replaceLease('agentd-slot-0', renewed.resourceVersion, spec(null, 2000));
    expect(await settlesWithin(woken, 2000)).toBe(true);

    unuse();
    await expect.poll(() => kube.openWatches).toBe(0);
    expect(watch.snapshot()).toBeNull();
    ac.abort();
  });

  it('resumes a watch the server ends, backs off one that ends at once, and lists again after a 410', async () => {
    watch.use();
    await expect.poll(() => kube.openWatches).toBe(1);
    const lists = (): number => kube.countRequests({ resource: 'leases', verb: 'list' });
    const watches = (): number => kube.countRequests({ resource: 'leases', verb: 'watch' });
    expect(lists()).toBe(1);
    // Ended by the server after it had served (open 30 s, as the server's own timeout ends it
    // after minutes): watched again at once, from where it was, without a list.
    await clock.advance(30_000);
    kube.cutWatches();
    await expect.poll(watches).toBe(2);
    await expect.poll(() => kube.openWatches).toBe(1);
    await expect.poll(() => watch.snapshot()).not.toBeNull();
    // Ended before it delivered anything or had been open a while (a proxy that drops watches):
    // a failure, retried after the watch backoff, not at once; the view is not in sync meanwhile.
    kube.cutWatches();
    await expect.poll(() => clock.pending).toBe(1); // the backoff's sleep
    expect(watch.snapshot()).toBeNull();
    expect(watches()).toBe(2);
    await clock.advance(1_000); // the first retry comes within 0.25–0.5 s
    await expect.poll(watches).toBe(3);
    await expect.poll(() => watch.snapshot()).not.toBeNull();
    expect(lists()).toBe(1);
    // The watch breaks and its version is compacted away: a 410, so a list, which fails once.
    await clock.advance(30_000);
    kube.cutWatches({ abrupt: true });
    await objects.createLease('agentd-slot-1', spec('b', 1000));
    kube.compactHistory();
    kube.failNext(1, { status: 500, match: { resource: 'leases', verb: 'list' } });
    await expect.poll(() => clock.pending).toBe(1);
    await clock.advance(1_000);
    await expect.poll(lists).toBe(2); // failed
    await expect.poll(() => clock.pending).toBe(1);
    expect(watch.snapshot()).toBeNull();
    await clock.advance(1_000);
    await expect.poll(lists).toBe(3);
    await expect.poll(() => watch.snapshot()?.get('agentd-slot-1')?.lease.holder).toBe('b');
    await expect.poll(() => kube.openWatches).toBe(1);
  });
});
