/** The node health model: serving only when the active machine runs a healthy kubelet. */
import { describe, expect, it } from 'vitest';
import { assessServing, NODE_NOT_READ_YET, type MachineHealth } from '../../../src/engine/node-health.js';

const m = (o: Partial<MachineHealth> = {}): MachineHealth => ({
  name: 'kube1',
  state: 'running',
  kubelet: 'active',
  healthy: true,
  ...o,
});

describe('assessServing', () => {
  it('serves when the active machine runs an active, healthy kubelet', () => {
    expect(assessServing('kube1', [m()])).toEqual({ serving: true, servingReason: null });
  });

  it.each<[string, MachineHealth[], RegExp]>([
    ['stopped', [m({ state: 'stopped', kubelet: 'inactive', healthy: false })], /kube1 is not running/],
    ['absent', [m({ state: 'absent', kubelet: 'inactive', healthy: false })], /kube1 does not exist/],
    [
      'kubelet failed',
      [m({ kubelet: 'failed', healthy: false })],
      /kubelet in the active machine kube1 is failed/,
    ],
    ['kubelet unhealthy', [m({ healthy: false })], /health endpoint/],
    [
      'the other machine runs',
      [m({ state: 'stopped', kubelet: 'inactive', healthy: false }), m({ name: 'kube2' })],
      /kube1 is not running/,
    ],
  ])('does not serve when the active machine is %s, and says why', (_what, machines, reason) => {
    const r = assessServing('kube1', machines);
    expect(r.serving).toBe(false);
    expect(r.servingReason).toMatch(reason);
  });

  it('does not serve on a node not joined, or while it is not known yet, saying why', () => {
    expect(assessServing(null, [m()]).servingReason).toMatch(/not joined/);
    expect(assessServing('kube1', [m()], { unknownBecause: NODE_NOT_READ_YET }).servingReason).toBe(
      NODE_NOT_READ_YET,
    );
  });
});
