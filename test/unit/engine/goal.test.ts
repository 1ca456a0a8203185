/** Goal-state resolution and drift: what an `update` request turns into, and what differs. */
import { describe, expect, it } from 'vitest';
import { REDACTED } from '../../../src/config/agent-config.js';
import { canonicalJson, diffConfigs, resolveGoal } from '../../../src/engine/goal.js';
import type { AgentError } from '../../../src/errors.js';
import { config } from './fakes.js';

function thrown(fn: () => unknown): AgentError {
  try {
    fn();
  } catch (err) {
    return err as AgentError;
  }
  throw new Error('expected a throw');
}

describe('resolveGoal', () => {
  const applied = config({ Downloads: { Kubernetes: { BaseURL: 'http://mirror.local/k8s' } } });

  it('neither config nor set: the applied config again (a copy)', () => {
    const goal = resolveGoal({}, applied, null);
    expect(goal).toEqual(applied);
    expect(goal).not.toBe(applied);
  });

  it('set changes only the named fields of the applied config', () => {
    const goal = resolveGoal(
      { set: { kubernetesVersion: '1.35.0', image: 'registry.local/rootfs:v2', nodeLabels: { a: 'b' } } },
      applied,
      null,
    );
    expect(goal.Cluster.Version).toBe('1.35.0');
    expect(goal.OCIImage).toBe('registry.local/rootfs:v2');
    expect(goal.Kubelet.Labels).toEqual({ a: 'b' });
    expect(goal.Kubelet.RegisterWithTaints).toEqual(applied.Kubelet.RegisterWithTaints);
    expect(goal.Downloads).toEqual(applied.Downloads);
    expect(applied.Cluster.Version).toBe('1.34.0'); // not mutated
  });

  it('a config without Downloads keeps the applied download overrides (upstream dropped them)', () => {
    const next = config({ MachineName: 'other' });
    delete next.Downloads;
    const goal = resolveGoal({ config: next }, applied, null);
    expect(goal.MachineName).toBe('other');
    expect(goal.Downloads).toEqual(applied.Downloads);
  });

  it('a fresh node starts from the fallback (the --sim default), or refuses without one', () => {
    const fallback = config({ MachineName: 'sim-node' });
    expect(resolveGoal({ set: { kubernetesVersion: '1.35.0' } }, null, fallback)).toMatchObject({
      MachineName: 'sim-node',
      Cluster: { Version: '1.35.0' },
    });
    const err = thrown(() => resolveGoal({}, null, null));
    expect(err.code).toBe('PRECONDITION_FAILED');
    expect(err.message).toContain('--config');
  });

  it('config and set together → INVALID_PARAMS', () => {
    expect(thrown(() => resolveGoal({ config: applied, set: {} }, applied, null)).code).toBe(
      'INVALID_PARAMS',
    );
  });

  it('a set that makes the config invalid → INVALID_PARAMS naming the field', () => {
    const err = thrown(() => resolveGoal({ set: { kubernetesVersion: 'latest' } }, applied, null));
    expect(err.code).toBe('INVALID_PARAMS');
    expect(err.message).toContain('set→Cluster.Version');
    expect(err.data.issues).toEqual([expect.objectContaining({ path: 'set→Cluster.Version' })]);
  });
});

describe('diffConfigs (drift)', () => {
  const base = config();

  it('no drift between equal configs, whatever the key order', () => {
    const reordered = JSON.parse(JSON.stringify({ ...base, MachineName: base.MachineName })) as typeof base;
    expect(diffConfigs(base, reordered)).toEqual([]);
    expect(canonicalJson({ b: 1, a: [1, { d: 2, c: 3 }] })).toBe('{"a":[1,{"c":3,"d":2}],"b":1}');
  });

  it('version, image, labels and taints all count (upstream ignored labels and taints)', () => {
    const next = structuredClone(base);
    next.Cluster.Version = '1.35.0';
    next.OCIImage = 'registry.local/rootfs:v2';
    next.Kubelet.Labels = { ...next.Kubelet.Labels, zone: 'b' };
    next.Kubelet.RegisterWithTaints = ['gpu=true:NoSchedule'];
    expect(diffConfigs(base, next)).toEqual([
      { path: 'Cluster.Version', from: '1.34.0', to: '1.35.0' },
      { path: 'Kubelet.Labels', from: base.Kubelet.Labels, to: next.Kubelet.Labels },
      { path: 'Kubelet.RegisterWithTaints', from: [], to: ['gpu=true:NoSchedule'] },
      { path: 'OCIImage', from: base.OCIImage, to: 'registry.local/rootfs:v2' },
    ]);
  });

  it('a changed bootstrap token is drift, reported redacted', () => {
    const next = structuredClone(base);
    next.Kubelet.Auth = { BootstrapToken: 'zzz999.fedcba9876543210' };
    const changes = diffConfigs(base, next);
    expect(changes).toEqual([{ path: 'Kubelet.Auth.BootstrapToken', from: REDACTED, to: REDACTED }]);
    expect(JSON.stringify(changes)).not.toContain('fedcba');
  });

  it('from nothing (a join): every field is a change, and the token is still redacted', () => {
    const changes = diffConfigs(null, base);
    expect(changes.map((c) => c.path)).toEqual(
      expect.arrayContaining(['MachineName', 'Cluster.Version', 'OCIImage', 'Kubelet.Labels']),
    );
    expect(changes.every((c) => c.from === null)).toBe(true);
    expect(changes).toContainEqual({ path: 'Kubelet.Auth.BootstrapToken', from: null, to: REDACTED });
    expect(JSON.stringify(changes)).not.toContain(base.Kubelet.Auth.BootstrapToken as string);
  });

  it('a section that appears (download overrides added) is reported field by field', () => {
    const next = structuredClone(base);
    next.Downloads = { Kubernetes: { BaseURL: 'http://mirror.local/k8s' } };
    expect(diffConfigs(base, next)).toEqual([
      { path: 'Downloads.Kubernetes.BaseURL', from: null, to: 'http://mirror.local/k8s' },
    ]);
  });
});
