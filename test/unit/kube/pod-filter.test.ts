import { describe, expect, it } from 'vitest';
import { planPodEvictions } from '../../../src/kube/pod-filter.js';
import { podSchema } from '../../../src/kube/schemas.js';
import type { KubePod } from '../../../src/kube/schemas.js';

function pod(
  name: string,
  extra: { owner?: string | null; emptyDir?: boolean; mirror?: boolean; phase?: string } = {},
): KubePod {
  const owner = extra.owner === undefined ? 'ReplicaSet' : extra.owner;
  return podSchema.parse({
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}`,
      annotations: extra.mirror ? { 'kubernetes.io/config.mirror': 'x' } : {},
      ownerReferences: owner === null ? [] : [{ kind: owner, name: `${name}-owner`, controller: true }],
    },
    spec: { volumes: extra.emptyDir ? [{ name: 'tmp', emptyDir: {} }] : [] },
    status: { phase: extra.phase ?? 'Running' },
  });
}

describe('planPodEvictions', () => {
  it('collects every reason a pod is refused', () => {
    const plan = planPodEvictions([pod('bare', { owner: null, emptyDir: true })], {});
    expect(plan.refuse).toEqual([
      {
        namespace: 'ns',
        name: 'bare',
        reason: expect.stringMatching(/not managed by a controller.*; uses emptyDir volume tmp/),
      },
    ]);
  });

  it('evicts finished pods whatever they are, but still skips mirror pods', () => {
    const plan = planPodEvictions(
      [
        pod('job', { owner: null, emptyDir: true, phase: 'Failed' }),
        pod('static', { mirror: true, phase: 'Succeeded' }),
      ],
      {},
    );
    expect(plan.evict.map((p) => p.name)).toEqual(['job']);
    expect(plan.skip.map((p) => p.name)).toEqual(['static']);
  });

  it('treats an owner that is not the controller as no controller', () => {
    const p = pod('x');
    p.metadata.ownerReferences = [{ kind: 'ReplicaSet', name: 'rs', controller: false }];
    expect(planPodEvictions([p], {}).refuse).toHaveLength(1);
    expect(planPodEvictions([p], { force: true }).evict).toEqual([
      { namespace: 'ns', name: 'x', uid: 'uid-x', warning: expect.stringContaining('not managed') },
    ]);
  });
});
