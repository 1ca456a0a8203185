// Why the fake API server (test/support/fake-kube): a PDB’s disruptionsAllowed and pods leaving at chosen moments, the drain’s timeouts on the injected clock; test/cluster/drain.test.ts drains against real PDB status.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import { CORDONED_BY_AGENTD_ANNOTATION, createNodeDrainer } from '../../../src/kube/drain.js';
import type { DrainOptions, NodeDrainer } from '../../../src/kube/drain.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube, FakeKubeOptions, TestClock } from '../../support/fake-kube.js';
import { expectBackoff } from '../../support/backoff.js';

const evictions = { verb: 'create', resource: 'pods/eviction' };
const refs = (pods: Array<{ namespace: string; name: string }>) =>
  pods.map((p) => `${p.namespace}/${p.name}`).sort();

describe('drainNode', () => {
  let kube: FakeKube;
  let clock: TestClock;
  let drainer: NodeDrainer;

  async function setup(options: FakeKubeOptions = {}, token?: string): Promise<void> {
    kube = await startFakeKube(options);
    clock = createTestClock();
    drainer = createNodeDrainer({ core: kube.kubeConfig(token).makeApiClient(CoreV1Api), clock });
    kube.addNode('n1');
  }

  const drain = (options: DrainOptions = {}) => drainer.drainNode('n1', { timeoutMs: 30_000, ...options });

  beforeEach(async () => {
    await setup();
  });
  afterEach(async () => {
    await kube.close();
  });

  it('cordons, evicts managed pods and waits until they are gone, skipping mirror and DaemonSet pods', async () => {
    kube.addPod({ name: 'web-1', nodeName: 'n1' });
    kube.addPod({
      name: 'db-0',
      namespace: 'data',
      nodeName: 'n1',
      owner: { kind: 'StatefulSet', name: 'db' },
    });
    kube.addPod({ name: 'done', nodeName: 'n1', owner: null, emptyDir: true, phase: 'Succeeded' });
    kube.addPod({
      name: 'kube-proxy',
      namespace: 'kube-system',
      nodeName: 'n1',
      owner: { kind: 'DaemonSet', name: 'kp' },
    });
    kube.addPod({
      name: 'etcd-n1',
      namespace: 'kube-system',
      nodeName: 'n1',
      owner: { kind: 'Node', name: 'n1' },
      mirror: true,
    });
    kube.addPod({ name: 'elsewhere', nodeName: 'n2' });

    const result = await drain({ ignoreDaemonSets: true, concurrency: 2 });

    expect(refs(result.evicted)).toEqual(['data/db-0', 'default/done', 'default/web-1']);
    expect(result.skipped).toEqual([
      { namespace: 'kube-system', name: 'etcd-n1', reason: expect.stringContaining('mirror pod') },
      { namespace: 'kube-system', name: 'kube-proxy', reason: 'managed by DaemonSet kp' },
    ]);
    expect(result).toMatchObject({
      node: 'n1',
      dryRun: false,
      cordon: { alreadyCordoned: false },
      remaining: [],
    });
    expect(kube.countRequests(evictions)).toBe(3);
    expect(
      refs(kube.listPods().map((p) => ({ namespace: p.metadata.namespace!, name: p.metadata.name }))),
    ).toEqual(['default/elsewhere', 'kube-system/etcd-n1', 'kube-system/kube-proxy']);
    expect(kube.getNode('n1')?.spec?.unschedulable).toBe(true);
  });

  it('retries a PDB-refused eviction (429) until the budget allows it', async () => {
    kube.addPod({ name: 'web-1', nodeName: 'n1', labels: { app: 'web' } });
    kube.addPdb({ name: 'web', selector: { matchLabels: { app: 'web' } }, disruptionsAllowed: 0 });
    let attempts = 0;
    kube.beforeNext(
      evictions,
      () => {
        attempts += 1;
        if (attempts === 3) kube.setPdbDisruptionsAllowed('default', 'web', 1);
      },
      3,
    );

    const result = await drain({ evictionRetryMs: 5000 });
    expect(refs(result.evicted)).toEqual(['default/web-1']);
    expect(kube.requests.filter((r) => r.resource === 'pods/eviction').map((r) => r.status)).toEqual([
      429, 429, 201,
    ]);
    expectBackoff(clock.sleeps, [5000, 10_000]);
  });

  it('fails with DRAIN_FAILED listing the blocked pods when a PDB holds past the timeout, leaving the node cordoned', async () => {
    kube.addPod({ name: 'web-1', nodeName: 'n1', labels: { app: 'web' } });
    kube.addPod({ name: 'free', nodeName: 'n1' });
    kube.addPdb({ name: 'web', selector: { matchLabels: { app: 'web' } }, disruptionsAllowed: 0 });

    const err = await drain({ timeoutMs: 30_000, evictionRetryMs: 5000 }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'DRAIN_FAILED',
      data: {
        node: 'n1',
        reason: 'Timeout',
        evicted: [{ namespace: 'default', name: 'free' }],
        remaining: [
          { namespace: 'default', name: 'web-1', reason: expect.stringContaining('PodDisruptionBudget') },
        ],
      },
    });
    expect((err as Error).message).toContain('default/web-1');
    // Tries at t = 0, then after jittered waits of 2.5–5, 5–10, 10–20 s, and once more at the
    // 30 s deadline on the injected clock: four or five attempts, no real waiting.
    const attempts = kube.countRequests({
      ...evictions,
      path: '/api/v1/namespaces/default/pods/web-1/eviction',
    });
    expect(attempts).toBeGreaterThanOrEqual(4);
    expect(attempts).toBeLessThanOrEqual(5);
    expect(kube.getPod('default', 'web-1')).toBeDefined();
    expect(kube.getNode('n1')?.spec?.unschedulable).toBe(true);
  });

  it('refuses the whole drain for an unmanaged pod before evicting anything, and takes back its cordon', async () => {
    kube.addPod({ name: 'web-1', nodeName: 'n1' });
    kube.addPod({ name: 'bare', nodeName: 'n1', owner: null });
    const err = await drain().catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'DRAIN_FAILED',
      data: { reason: 'PodsRefused', refused: [{ name: 'bare', reason: expect.stringContaining('force') }] },
    });
    expect(kube.countRequests(evictions)).toBe(0);
    expect(kube.getNode('n1')?.spec?.unschedulable).toBeUndefined();
    expect(kube.getNode('n1')?.metadata.annotations?.[CORDONED_BY_AGENTD_ANNOTATION]).toBeUndefined();
  });

  it("keeps an administrator's cordon when it refuses a drain", async () => {
    kube.patchNode('n1', { spec: { unschedulable: true } });
    kube.addPod({ name: 'bare', nodeName: 'n1', owner: null });
    await expect(drain()).rejects.toMatchObject({ code: 'DRAIN_FAILED' });
    expect(kube.getNode('n1')?.spec?.unschedulable).toBe(true);
  });

  it('evicts an unmanaged pod with force, with a warning', async () => {
    kube.addPod({ name: 'bare', nodeName: 'n1', owner: null });
    const result = await drain({ force: true });
    expect(refs(result.evicted)).toEqual(['default/bare']);
    expect(result.warnings).toEqual([
      { namespace: 'default', name: 'bare', reason: expect.stringContaining('not be recreated') },
    ]);
  });

  it('refuses emptyDir pods unless deleteEmptyDirData', async () => {
    kube.addPod({ name: 'cache', nodeName: 'n1', emptyDir: true });
    await expect(drain()).rejects.toMatchObject({
      code: 'DRAIN_FAILED',
      data: { refused: [{ name: 'cache', reason: expect.stringContaining('emptyDir') }] },
    });
    expect(kube.countRequests(evictions)).toBe(0);
    expect(refs((await drain({ deleteEmptyDirData: true })).evicted)).toEqual(['default/cache']);
  });

  it('refuses DaemonSet pods unless ignoreDaemonSets', async () => {
    kube.addPod({ name: 'ds-1', nodeName: 'n1', owner: { kind: 'DaemonSet', name: 'ds' } });
    await expect(drain()).rejects.toMatchObject({
      code: 'DRAIN_FAILED',
      data: { refused: [{ name: 'ds-1', reason: expect.stringContaining('ignoreDaemonSets') }] },
    });
    const result = await drain({ ignoreDaemonSets: true });
    expect(result.evicted).toEqual([]);
    expect(refs(result.skipped)).toEqual(['default/ds-1']);
  });

  it('changes nothing in a dry run and reports what would happen', async () => {
    kube.addPod({ name: 'web-1', nodeName: 'n1' });
    kube.addPod({ name: 'bare', nodeName: 'n1', owner: null });
    kube.addPod({ name: 'static', nodeName: 'n1', mirror: true });
    kube.clearRequests();
    const result = await drain({ dryRun: true });
    expect(result).toMatchObject({
      dryRun: true,
      cordon: { alreadyCordoned: false },
      evicted: [{ namespace: 'default', name: 'web-1' }],
      skipped: [{ name: 'static' }],
      remaining: [{ name: 'bare' }],
    });
    expect(kube.requests.map((r) => r.verb).sort()).toEqual(['get', 'list']);
    expect(kube.getNode('n1')?.spec?.unschedulable).toBeUndefined();
    expect(kube.listPods()).toHaveLength(3);
  });

  it('fails when an evicted pod is still terminating at the timeout', async () => {
    await kube.close();
    await setup({ podDeletionDelayMs: 600_000 });
    kube.addPod({ name: 'slow', nodeName: 'n1' });
    await expect(drain({ timeoutMs: 10_000, pollIntervalMs: 1000 })).rejects.toMatchObject({
      code: 'DRAIN_FAILED',
      data: { remaining: [{ name: 'slow', reason: expect.stringContaining('terminating') }] },
    });
    expect(kube.getPod('default', 'slow')?.metadata.deletionTimestamp).toBeDefined();
  });

  it('is cancelled through its signal', async () => {
    kube.addPod({ name: 'web-1', nodeName: 'n1', labels: { app: 'web' } });
    kube.addPdb({ name: 'web', selector: {}, disruptionsAllowed: 0 });
    const controller = new AbortController();
    kube.beforeNext(evictions, () => controller.abort(), 2);
    await expect(drain({ signal: controller.signal })).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('stops with KUBE_UNAVAILABLE when evictions are forbidden', async () => {
    await kube.close();
    await setup(
      {
        tokens: { drainer: { rules: [{ verbs: ['get', 'patch', 'list'], resources: ['nodes', 'pods'] }] } },
      },
      'drainer',
    );
    kube.addPod({ name: 'web-1', nodeName: 'n1' });
    await expect(drain()).rejects.toMatchObject({ code: 'KUBE_UNAVAILABLE', data: { reason: 'Forbidden' } });
  });
});
