import { describe, expect, it } from 'vitest';
import { machineSchema } from '../../../src/kube/schemas.js';
import type { Machine } from '../../../src/kube/schemas.js';
import {
  decideMachine,
  describeDecision,
  diffGoal,
  goalSetFromSpec,
  readAppliedView,
} from '../../../src/watcher/machine-goal.js';
import type { AppliedView } from '../../../src/watcher/machine-goal.js';

function machine(
  spec: Record<string, unknown> = {},
  status?: Record<string, unknown>,
  generation = 3,
): Machine {
  return machineSchema.parse({
    metadata: { name: 'w1', uid: 'uid-1', resourceVersion: '10', generation },
    spec,
    ...(status ? { status } : {}),
  });
}

const applied: AppliedView = {
  kubernetesVersion: '1.34.0',
  image: 'img:v1',
  nodeLabels: { a: '1' },
  registerWithTaints: ['x=y:NoSchedule', 'p=q:NoExecute'],
};

describe('decideMachine', () => {
  it('asks for a repave when the counter is ahead of the acknowledged one', () => {
    const d = decideMachine(
      machine({ operations: { repaveCounter: 2 } }, { operations: { repaveCounter: 1 } }),
      applied,
    );
    expect(d).toMatchObject({ repave: true, requestedCounter: 2, acknowledgedCounter: 1, drift: [] });
    expect(d.idempotencyKey).toBe('machine/uid-1/gen-3/repave-2');
    expect(describeDecision(d)).toBe('repave requested (repaveCounter 1 → 2)');
  });

  it('does nothing when the counter is acknowledged (or behind) and nothing differs', () => {
    expect(
      decideMachine(
        machine({ operations: { repaveCounter: 1 } }, { operations: { repaveCounter: 1 } }),
        applied,
      ),
    ).toMatchObject({ repave: false, drift: [] });
    expect(decideMachine(machine({}, { operations: { repaveCounter: 5 } }), applied).repave).toBe(false);
    expect(decideMachine(machine(), applied)).toMatchObject({ repave: false, drift: [], set: {} });
  });

  it('compares version (with or without v), image, labels and taints (in any order)', () => {
    const same = machine({
      kubernetes: {
        version: 'v1.34.0',
        bootstrapTokenRef: { name: 't' },
        nodeLabels: { a: '1' },
        registerWithTaints: ['p=q:NoExecute', 'x=y:NoSchedule'],
      },
      agent: { image: 'img:v1' },
    });
    expect(decideMachine(same, applied).drift).toEqual([]);
    const other = machine({
      kubernetes: {
        version: '1.35.0',
        bootstrapTokenRef: { name: 't' },
        nodeLabels: { a: '2' },
        registerWithTaints: [],
      },
      agent: { image: 'img:v2' },
    });
    const d = decideMachine(other, applied);
    expect(d.drift.map((x) => x.field)).toEqual([
      'kubernetesVersion',
      'image',
      'nodeLabels',
      'registerWithTaints',
    ]);
    expect(d.set).toEqual({
      kubernetesVersion: '1.35.0',
      image: 'img:v2',
      nodeLabels: { a: '2' },
      registerWithTaints: [],
    });
    expect(describeDecision(d)).toContain('kubernetesVersion "1.34.0" → "1.35.0"');
  });

  it('leaves fields the spec does not carry alone', () => {
    const m = machine({ kubernetes: { bootstrapTokenRef: { name: 't' } } });
    expect(goalSetFromSpec(m)).toEqual({});
    expect(diffGoal({ nodeLabels: { a: '1', b: '2' } }, applied)).toHaveLength(1);
  });
});

describe('readAppliedView', () => {
  it('reads the fields the watcher compares from a (redacted) applied config', () => {
    expect(
      readAppliedView({
        MachineName: 'w1',
        Cluster: { Version: '1.34.0', CaCertBase64: 'x' },
        OCIImage: 'img:v1',
        Kubelet: { Labels: { a: '1' }, Auth: { BootstrapToken: '[REDACTED]' } },
      }),
    ).toEqual({
      kubernetesVersion: '1.34.0',
      image: 'img:v1',
      nodeLabels: { a: '1' },
      registerWithTaints: [],
    });
  });

  it('names the missing field of a config it cannot read', () => {
    expect(() => readAppliedView({ Cluster: {} })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
  });
});
