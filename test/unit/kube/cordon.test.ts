// Why the fake API server (test/support/fake-kube): an administrator’s cordon between agentd’s read and its patch, at that moment.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import { CORDONED_BY_AGENTD_ANNOTATION, cordonNode, uncordonNode } from '../../../src/kube/cordon.js';
import { startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';

const nodePatches = { verb: 'patch', resource: 'nodes' };

describe('cordon / uncordon', () => {
  let kube: FakeKube;
  let core: CoreV1Api;

  beforeEach(async () => {
    kube = await startFakeKube();
    core = kube.kubeConfig().makeApiClient(CoreV1Api);
  });
  afterEach(async () => {
    await kube.close();
  });

  it("cordons a schedulable node and marks the cordon as agentd's", async () => {
    kube.addNode('n1');
    expect(await cordonNode(core, 'n1')).toEqual({ alreadyCordoned: false });
    const node = kube.getNode('n1');
    expect(node?.spec?.unschedulable).toBe(true);
    expect(node?.metadata.annotations?.[CORDONED_BY_AGENTD_ANNOTATION]).toBe('true');
  });

  it("leaves an administrator's cordon alone: no marker, and uncordon keeps it", async () => {
    kube.addNode('n1', { unschedulable: true });
    expect(await cordonNode(core, 'n1')).toEqual({ alreadyCordoned: true });
    expect(kube.countRequests(nodePatches)).toBe(0);
    expect(await uncordonNode(core, 'n1')).toEqual({ uncordoned: false, outcome: 'cordoned-by-other' });
    expect(kube.getNode('n1')?.spec?.unschedulable).toBe(true);
    expect(kube.countRequests(nodePatches)).toBe(0);
  });

  it('uncordons its own cordon and removes the marker', async () => {
    kube.addNode('n1', { annotations: { keep: 'me' } });
    await cordonNode(core, 'n1');
    expect(await uncordonNode(core, 'n1')).toEqual({ uncordoned: true, outcome: 'uncordoned' });
    const node = kube.getNode('n1');
    expect(node?.spec?.unschedulable).toBeUndefined();
    expect(node?.metadata.annotations).toEqual({ keep: 'me' });
  });

  it("uncordons anyone's cordon with force (an operator's explicit request)", async () => {
    kube.addNode('n1', { unschedulable: true });
    expect(await uncordonNode(core, 'n1', { force: true })).toEqual({
      uncordoned: true,
      outcome: 'uncordoned',
    });
    expect(kube.getNode('n1')?.spec?.unschedulable).toBeUndefined();
  });

  it('reports a schedulable node as not cordoned and drops a stale marker', async () => {
    kube.addNode('n1');
    expect(await uncordonNode(core, 'n1')).toEqual({ uncordoned: false, outcome: 'not-cordoned' });
    expect(kube.countRequests(nodePatches)).toBe(0);
    kube.patchNode('n1', { metadata: { annotations: { [CORDONED_BY_AGENTD_ANNOTATION]: 'true' } } });
    expect(await uncordonNode(core, 'n1')).toEqual({ uncordoned: false, outcome: 'not-cordoned' });
    expect(kube.getNode('n1')?.metadata.annotations?.[CORDONED_BY_AGENTD_ANNOTATION]).toBeUndefined();
  });

  it('re-decides from a fresh read when an administrator cordons between the read and the patch', async () => {
    kube.addNode('n1');
    kube.beforeNext(nodePatches, () => {
      kube.patchNode('n1', { spec: { unschedulable: true } });
    });
    expect(await cordonNode(core, 'n1')).toEqual({ alreadyCordoned: true });
    expect(kube.requests.filter((r) => r.verb === 'patch').map((r) => r.status)).toEqual([409]);
    expect(kube.getNode('n1')?.metadata.annotations?.[CORDONED_BY_AGENTD_ANNOTATION]).toBeUndefined();
  });

  it('fails with NOT_FOUND for a missing node', async () => {
    await expect(cordonNode(core, 'ghost')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
