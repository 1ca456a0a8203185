import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AgentError } from '../../../src/errors.js';
import { createNodeWatch, type NodeRecord, type WatchNode } from '../../../src/kube/node-watch.js';
import { startFakeKube, type FakeKube } from '../../support/fake-kube.js';

describe('createNodeWatch', () => {
  let kube: FakeKube;
  let watchNode: WatchNode;
  let stops: Array<() => void>;

  beforeEach(async () => {
    kube = await startFakeKube();
    const kc = kube.kubeConfig();
    watchNode = createNodeWatch({ kc, core: kc.makeApiClient(CoreV1Api) });
    stops = [];
  });
  afterEach(async () => {
    for (const stop of stops) stop();
    await kube.close();
  });

  async function follow(name: string) {
    const seen: Array<NodeRecord | null> = [];
    const done = vi.fn<(err: AgentError | null) => void>();
    stops.push(
      await watchNode(
        name,
        (n) => seen.push(n),
        (n) => seen.push(n),
        done,
      ),
    );
    return { seen, done };
  }

  it('hands over the Node as listed, then each change of it, and null when it is gone', async () => {
    kube.addNode('w1');
    kube.addNode('w2');
    const { seen, done } = await follow('w1');
    expect(seen).toEqual([{ name: 'w1', resourceVersion: expect.any(String), unschedulable: false }]);
    kube.patchNode('w2', { spec: { unschedulable: true } }); // another node: not seen
    kube.patchNode('w1', { spec: { unschedulable: true } });
    await vi.waitFor(() => expect(seen.at(-1)).toMatchObject({ name: 'w1', unschedulable: true }));
    expect(seen).toHaveLength(2);
    kube.deleteNode('w1');
    await vi.waitFor(() => expect(seen.at(-1)).toBeNull());
    expect(done).not.toHaveBeenCalled();
  });

  it('a Node that does not exist yet is null, until it is added', async () => {
    const { seen } = await follow('w1');
    expect(seen).toEqual([null]);
    kube.addNode('w1');
    await vi.waitFor(() => expect(seen.at(-1)).toMatchObject({ name: 'w1', unschedulable: false }));
  });

  it('a Node that is not one (a cordon that is not a boolean) is an error naming the field, listed or watched', async () => {
    kube.addNode('w1');
    kube.patchNode('w1', { spec: { unschedulable: 'yes' } });
    await expect(follow('w1')).rejects.toMatchObject({
      message: expect.stringContaining('Node w1: spec.unschedulable:') as string,
    });
    kube.patchNode('w1', { spec: { unschedulable: false } });
    const { done } = await follow('w1');
    kube.patchNode('w1', { spec: { unschedulable: 'no' } });
    await vi.waitFor(() => expect(done).toHaveBeenCalledTimes(1));
    expect(done.mock.calls[0]?.[0]?.message).toContain('Node w1: spec.unschedulable:');
  });
});
