import { describe, expect, it } from 'vitest';
import {
  buildStatusMergePatch,
  kubeTimestamp,
  withNodeUpdatedCondition,
} from '../../../src/kube/machine-status.js';
import { machineSchema } from '../../../src/kube/schemas.js';
import type { MachineCondition } from '../../../src/kube/schemas.js';

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
const T1 = Date.UTC(2026, 0, 2, 12, 30, 15, 999);

const machine = machineSchema.parse({
  metadata: { name: 'w', uid: 'u', resourceVersion: '42', generation: 3 },
  status: {
    phase: 'Pending',
    conditions: [
      { type: 'Reachable', status: 'True', reason: 'Ping', extra: 'kept' },
      { type: 'NodeUpdated', status: 'False', reason: 'InProgress', lastTransitionTime: kubeTimestamp(T0) },
    ],
  },
});

describe('machine status patch', () => {
  it('formats timestamps like Kubernetes (seconds, Z)', () => {
    expect(kubeTimestamp(T1)).toBe('2026-01-02T12:30:15Z');
  });

  it('sends only the given fields, with the fresh resourceVersion as precondition', () => {
    expect(
      buildStatusMergePatch(
        machine,
        { phase: 'Joining', message: null, repaveCounter: 2, agentImage: 'img' },
        T1,
      ),
    ).toEqual({
      metadata: { resourceVersion: '42' },
      status: { phase: 'Joining', message: null, operations: { repaveCounter: 2 }, agent: { image: 'img' } },
    });
    expect(buildStatusMergePatch(machine, {}, T1).status).toEqual({});
  });

  it('replaces only NodeUpdated, keeping other conditions verbatim and in place', () => {
    const patch = buildStatusMergePatch(
      machine,
      { nodeUpdated: { status: 'True', reason: 'Succeeded' } },
      T1,
    );
    expect(patch.status.conditions).toEqual([
      { type: 'Reachable', status: 'True', reason: 'Ping', extra: 'kept' },
      {
        type: 'NodeUpdated',
        status: 'True',
        reason: 'Succeeded',
        message: '',
        lastTransitionTime: '2026-01-02T12:30:15Z',
        observedGeneration: 3,
      },
    ]);
  });

  it('moves lastTransitionTime only when the condition status changes', () => {
    const before: MachineCondition[] = [
      {
        type: 'NodeUpdated',
        status: 'False',
        reason: 'InProgress',
        lastTransitionTime: '2026-01-01T00:00:00Z',
      },
    ];
    const same = withNodeUpdatedCondition(
      before,
      { status: 'False', reason: 'Failed', message: 'boom' },
      4,
      T1,
    );
    expect(same).toEqual([
      {
        type: 'NodeUpdated',
        status: 'False',
        reason: 'Failed',
        message: 'boom',
        lastTransitionTime: '2026-01-01T00:00:00Z',
        observedGeneration: 4,
      },
    ]);
    const appended = withNodeUpdatedCondition([], { status: 'Unknown', reason: 'Starting' }, 1, T0);
    expect(appended).toEqual([
      expect.objectContaining({ type: 'NodeUpdated', lastTransitionTime: '2026-01-01T00:00:00Z' }),
    ]);
  });
});
