// Why the fake API server (test/support/fake-kube): a Node’s Ready and kubelet version moved at chosen moments, and a 500.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getNodeHealth } from '../../../src/kube/node-health.js';
import { startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';

describe('getNodeHealth (against the fake API server over HTTP)', () => {
  let kube: FakeKube;
  let core: CoreV1Api;
  beforeEach(async () => {
    kube = await startFakeKube();
    core = kube.kubeConfig().makeApiClient(CoreV1Api);
  });
  afterEach(async () => {
    await kube.close();
  });

  it('reads Ready and the kubelet version, as the kubelet moves them', async () => {
    kube.addNode('w1', { kubeletVersion: 'v1.34.0' });
    expect(await getNodeHealth(core, 'w1')).toMatchObject({
      name: 'w1',
      ready: true,
      kubeletVersion: 'v1.34.0',
    });
    kube.setNodeStatus('w1', { ready: false, message: 'CNI not ready' });
    expect(await getNodeHealth(core, 'w1')).toMatchObject({
      ready: false,
      readyCondition: 'False: KubeletNotReady: CNI not ready',
      kubeletVersion: 'v1.34.0',
    });
    kube.setNodeStatus('w1', { ready: true, kubeletVersion: 'v1.35.0' });
    expect(await getNodeHealth(core, 'w1')).toMatchObject({ ready: true, kubeletVersion: 'v1.35.0' });
    // Only the Ready condition is replaced; others the kubelet reports stay.
    expect((kube.getNode('w1')?.status?.conditions as unknown[]).length).toBe(1);
  });

  it('a missing Node is NOT_FOUND, a failing server KUBE_UNAVAILABLE', async () => {
    await expect(getNodeHealth(core, 'nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    kube.addNode('w1');
    kube.failNext(1, { status: 503 });
    await expect(getNodeHealth(core, 'w1')).rejects.toMatchObject({ code: 'KUBE_UNAVAILABLE' });
  });
});
