// Why the fake API server (test/support/fake-kube): a Node kube-apiserver’s schema would refuse (spec.unschedulable not a boolean), to see the decode error.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AgentError } from '../../../src/errors.js';
import { createNodeWatch, type NodeRecord, type NodeWatch } from '../../../src/kube/node-watch.js';
import { createReflector, type Reflector } from '../../../src/kube/reflector.js';
import { createTestClock, startFakeKube, type FakeKube } from '../../support/fake-kube.js';

describe('createNodeWatch', () => {
  let kube: FakeKube;
  let nodes: NodeWatch;
  let reflectors: Reflector[];

  beforeEach(async () => {
    kube = await startFakeKube();
    const kc = kube.kubeConfig();
    nodes = createNodeWatch({ kc, core: kc.makeApiClient(CoreV1Api) });
    reflectors = [];
  });
  afterEach(async () => {
    for (const r of reflectors) await r.stop();
    await kube.close();
  });

  /** Follow the Node `name` as the session does: listed (first, or null), then each change. */
  async function follow(name: string) {
    const seen: Array<NodeRecord | null> = [];
    const decodeErrors: AgentError[] = [];
    const r = createReflector<NodeRecord>({
      ...nodes.source(name),
      onList: (items) => seen.push(items[0] ?? null),
      onEvent: (type, n) => seen.push(type === 'DELETED' ? null : n),
      onDecodeError: (err) => decodeErrors.push(err),
      clock: createTestClock(),
    });
    reflectors.push(r);
    void r.start();
    await vi.waitFor(() => expect(kube.openWatches).toBe(reflectors.length));
    return { seen, decodeErrors };
  }

  it('hands over the Node as listed, then each change of it, and null when it is gone', async () => {
    kube.addNode('w1');
    kube.addNode('w2');
    const { seen } = await follow('w1');
    expect(seen).toEqual([{ name: 'w1', resourceVersion: expect.any(String), unschedulable: false }]);
    kube.patchNode('w2', { spec: { unschedulable: true } }); // another node: not seen
    kube.patchNode('w1', { spec: { unschedulable: true } });
    await vi.waitFor(() => expect(seen.at(-1)).toMatchObject({ name: 'w1', unschedulable: true }));
    expect(seen).toHaveLength(2);
    kube.deleteNode('w1');
    await vi.waitFor(() => expect(seen.at(-1)).toBeNull());
  });

  it('a Node that does not exist yet is null, until it is added', async () => {
    const { seen } = await follow('w1');
    expect(seen).toEqual([null]);
    kube.addNode('w1');
    await vi.waitFor(() => expect(seen.at(-1)).toMatchObject({ name: 'w1', unschedulable: false }));
  });

  it('a Node that is not one (a cordon that is not a boolean) is a decode error naming the field, listed or watched', async () => {
    kube.addNode('w1');
    kube.patchNode('w1', { spec: { unschedulable: 'yes' } });
    const { seen, decodeErrors } = await follow('w1');
    expect(seen).toEqual([null]);
    expect(decodeErrors.map((e) => e.message)).toEqual([
      expect.stringContaining('Node w1: spec.unschedulable:') as string,
    ]);
    kube.patchNode('w1', { spec: { unschedulable: true } });
    await vi.waitFor(() => expect(seen.at(-1)).toMatchObject({ unschedulable: true }));
    kube.patchNode('w1', { spec: { unschedulable: 'no' } });
    await vi.waitFor(() => expect(decodeErrors).toHaveLength(2));
    expect(decodeErrors[1]?.message).toContain('Node w1: spec.unschedulable:');
  });
});
