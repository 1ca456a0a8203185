import { describe, expect, it } from 'vitest';
import {
  createUpdateDrainer,
  drainResultRecord,
  requireNodeOps,
  UPDATE_DRAIN_OPTIONS,
} from '../../../src/engine/drain-ops.js';
import type { NodeDrainOps } from '../../../src/engine/drain-ops.js';
import { DrainFailedError } from '../../../src/errors.js';
import type { DrainOptions, DrainResult } from '../../../src/kube/index.js';

function fakeOps(options: { alreadyCordoned?: boolean; drainFails?: boolean; unavailable?: string } = {}) {
  const calls: string[] = [];
  const drains: DrainOptions[] = [];
  const ops: NodeDrainOps = {
    unavailableReason: () => options.unavailable ?? null,
    cordoned: () => null,
    cordon: async () => {
      calls.push('cordon');
      return { alreadyCordoned: Boolean(options.alreadyCordoned) };
    },
    drain: async (o) => {
      calls.push('drain');
      drains.push(o);
      if (options.drainFails) {
        throw new DrainFailedError('drain Node n: 1 pod(s) could not be evicted', {
          data: {
            node: 'n',
            reason: 'Timeout',
            evicted: [],
            skipped: [],
            remaining: [{ namespace: 'd', name: 'p', reason: 'pdb' }],
          },
        });
      }
      const r: DrainResult = {
        node: 'n',
        dryRun: false,
        cordon: null,
        evicted: [{ namespace: 'd', name: 'p' }],
        skipped: [],
        remaining: [],
        warnings: [],
      };
      return r;
    },
    uncordon: async () => {
      calls.push('uncordon');
      return { uncordoned: true, outcome: 'uncordoned' };
    },
  };
  return { ops, calls, drains };
}

describe('createUpdateDrainer', () => {
  const signal = new AbortController().signal;

  it('cordons first, then drains without cordoning again, with the update defaults', async () => {
    const f = fakeOps();
    const r = await createUpdateDrainer(f.ops).drain(signal);
    expect(f.calls).toEqual(['cordon', 'drain']);
    expect(f.drains[0]).toMatchObject({ ...UPDATE_DRAIN_OPTIONS, cordon: false, signal });
    expect(r).toMatchObject({
      cordonedByUs: true,
      result: { alreadyCordoned: false, evicted: [{ name: 'p' }] },
    });
  });

  it('reports a cordon it did not make, so the update will not uncordon', async () => {
    const f = fakeOps({ alreadyCordoned: true });
    expect((await createUpdateDrainer(f.ops).drain(signal)).cordonedByUs).toBe(false);
  });

  it('takes its own cordon back when the drain fails, and rethrows', async () => {
    const f = fakeOps({ drainFails: true });
    await expect(createUpdateDrainer(f.ops).drain(signal)).rejects.toMatchObject({ code: 'DRAIN_FAILED' });
    expect(f.calls).toEqual(['cordon', 'drain', 'uncordon']);
  });

  it('leaves an administrator’s cordon when the drain fails', async () => {
    const f = fakeOps({ drainFails: true, alreadyCordoned: true });
    await expect(createUpdateDrainer(f.ops).drain(signal)).rejects.toMatchObject({ code: 'DRAIN_FAILED' });
    expect(f.calls).toEqual(['cordon', 'drain']);
  });
});

describe('requireNodeOps', () => {
  it('says why drain cannot run', () => {
    expect(() => requireNodeOps(null)).toThrow(expect.objectContaining({ code: 'PRECONDITION_FAILED' }));
    expect(() => requireNodeOps(fakeOps({ unavailable: 'no credentials' }).ops)).toThrow(
      expect.objectContaining({ code: 'PRECONDITION_FAILED', data: { reason: 'no credentials' } }),
    );
    const { ops } = fakeOps();
    expect(requireNodeOps(ops)).toBe(ops);
  });
});

describe('drainResultRecord', () => {
  it('lists evicted, skipped and remaining pods and whether the node was cordoned before', () => {
    expect(
      drainResultRecord({
        node: 'n',
        dryRun: true,
        cordon: { alreadyCordoned: true },
        evicted: [],
        skipped: [{ namespace: 'd', name: 'ds', reason: 'DaemonSet' }],
        remaining: [],
        warnings: [],
      }),
    ).toEqual({
      node: 'n',
      dryRun: true,
      alreadyCordoned: true,
      evicted: [],
      skipped: [{ namespace: 'd', name: 'ds', reason: 'DaemonSet' }],
      remaining: [],
      warnings: [],
    });
  });
});
