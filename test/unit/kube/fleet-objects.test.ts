// Why the fake API server (test/support/fake-kube): no fault: Lease and ConfigMap reads and writes any server answers alike; portable (test/cluster/fleet.test.ts writes the same Leases).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import {
  createFleetObjects,
  isAlreadyExists,
  isWriteConflict,
  type ConfigMapWatchEvent,
  type FleetObjects,
} from '../../../src/kube/fleet-objects.js';
import { startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';

const NS = 'agentd-system';
const T0 = Date.UTC(2026, 10, 25, 12, 0, 0, 123);

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('fleet objects (Leases and ConfigMaps)', () => {
  let kube: FakeKube;
  let api: FleetObjects;

  beforeEach(async () => {
    kube = await startFakeKube();
    const kc = kube.kubeConfig();
    api = createFleetObjects({
      kc,
      core: kc.makeApiClient(CoreV1Api),
      coordination: kc.makeApiClient(CoordinationV1Api),
      namespace: NS,
    });
  });
  afterEach(async () => {
    await kube.close();
  });

  it('creates, reads and replaces a Lease with MicroTime timestamps', async () => {
    expect(await api.getLease('agentd-slot-0')).toBeNull();
    const spec = { holder: 'n1', durationSeconds: 60, acquireTimeMs: T0, renewTimeMs: T0, transitions: 0 };
    const created = await api.createLease('agentd-slot-0', spec);
    expect(created).toMatchObject({ holder: 'n1', durationSeconds: 60, renewTimeMs: T0, acquireTimeMs: T0 });
    // What went over the wire is the API server's MicroTime (microseconds).
    expect(kube.getLease(NS, 'agentd-slot-0')?.spec?.renewTime).toBe('2026-11-25T12:00:00.123000Z');
    const renewed = await api.replaceLease('agentd-slot-0', created.resourceVersion, {
      ...spec,
      renewTimeMs: T0 + 20_000,
    });
    expect(renewed.renewTimeMs).toBe(T0 + 20_000);
    expect(renewed.resourceVersion).not.toBe(created.resourceVersion);
    expect(await api.getLease('agentd-slot-0')).toEqual(renewed);
  });

  it('reports a stale resourceVersion as a conflict and a taken name as AlreadyExists', async () => {
    const spec = { holder: 'n1', durationSeconds: 60, acquireTimeMs: T0, renewTimeMs: T0, transitions: 0 };
    const first = await api.createLease('agentd-slot-0', spec);
    const again = await caught(api.createLease('agentd-slot-0', { ...spec, holder: 'n2' }));
    expect(isAlreadyExists(again)).toBe(true);
    expect(isWriteConflict(again)).toBe(false);
    await api.replaceLease('agentd-slot-0', first.resourceVersion, { ...spec, holder: 'n2' });
    const stale = await caught(
      api.replaceLease('agentd-slot-0', first.resourceVersion, { ...spec, holder: 'n3' }),
    );
    expect(isWriteConflict(stale)).toBe(true);
    expect((await api.getLease('agentd-slot-0'))?.holder).toBe('n2');
  });

  it('writes a free slot as an empty holder and reads it back as null', async () => {
    const l = await api.createLease('agentd-slot-1', {
      holder: null,
      durationSeconds: 60,
      acquireTimeMs: null,
      renewTimeMs: null,
      transitions: 2,
    });
    expect(l).toMatchObject({ holder: null, renewTimeMs: null, transitions: 2 });
  });

  it('creates and replaces ConfigMaps with optimistic concurrency', async () => {
    expect(await api.getConfigMap('agentd-fleet-state')).toBeNull();
    const c = await api.createConfigMap('agentd-fleet-state', { 'failures.json': '[]' });
    const r = await api.replaceConfigMap('agentd-fleet-state', c.resourceVersion, { 'failures.json': '[1]' });
    expect(r.data).toEqual({ 'failures.json': '[1]' });
    expect(
      isWriteConflict(await caught(api.replaceConfigMap('agentd-fleet-state', c.resourceVersion, {}))),
    ).toBe(true);
  });

  it('lists then watches one ConfigMap, and ignores the others', async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 2' });
    kube.putConfigMap(NS, 'other', { a: 'b' });
    const listed: unknown[] = [];
    const events: ConfigMapWatchEvent[] = [];
    const stop = await api.watchConfigMap(
      'agentd-fleet',
      (c) => listed.push(c?.data ?? null),
      (e) => events.push(e),
      () => undefined,
    );
    try {
      await expect.poll(() => listed).toEqual([{ 'policy.yaml': 'maxConcurrent: 2' }]);
      await kube.whenWatching();
      kube.putConfigMap(NS, 'other', { a: 'c' });
      kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 3' });
      kube.deleteConfigMap(NS, 'agentd-fleet');
      await expect.poll(() => events.length).toBe(2);
      expect(events[0]).toMatchObject({
        type: 'MODIFIED',
        configMap: { data: { 'policy.yaml': 'maxConcurrent: 3' } },
      });
      expect(events[1]?.type).toBe('DELETED');
    } finally {
      stop();
    }
  });
});
