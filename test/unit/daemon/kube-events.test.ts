/**
 * Which Kubernetes Events the daemon derives from the engine's event bus (src/daemon/kube-events.ts):
 * one per state change or phase end, and one per window for a long fleet wait or a long-held slot.
 */
import { describe, expect, it } from 'vitest';
import { EventBus } from '../../../src/engine/events.js';
import type { Operation } from '../../../src/engine/operation.js';
import { followOperationEvents, type NodeEvent } from '../../../src/daemon/kube-events.js';
import { createManualClock, settle } from '../../support/manual-clock.js';

const WINDOW = 60_000;

function op(o: Partial<Operation> = {}): Operation {
  return {
    id: 'op-1',
    kind: 'update',
    state: 'running',
    reason: null,
    requestedBy: 'watcher',
    idempotencyKey: null,
    createdAt: '2026-11-25T12:00:00.000Z',
    startedAt: '2026-11-25T12:00:00.000Z',
    finishedAt: null,
    from: 'kube1',
    to: 'kube2',
    phases: [],
    result: null,
    error: null,
    ...o,
  };
}

function follow() {
  const events = new EventBus();
  const clock = createManualClock();
  const got: NodeEvent[] = [];
  const stop = followOperationEvents({ events, emit: (e) => got.push(e), clock, fleetWindowMs: WINDOW });
  const publishOp = (o: Partial<Operation>): void => events.publish({ type: 'operation', operation: op(o) });
  const phase = (name: string, state: 'running' | 'succeeded' | 'failed'): void =>
    events.publish({ type: 'phase', operationId: 'op-1', phase: name, state, at: '' });
  return { events, clock, got, stop, publishOp, phase };
}

describe('the Events of operations', () => {
  it('records an update started, switched, verified and rolled back with its reason, once each', () => {
    const { got, publishOp, phase } = follow();
    publishOp({ state: 'pending' });
    publishOp({});
    publishOp({}); // persisted again (a phase started): no second UpdateStarted
    phase('start', 'running');
    phase('start', 'succeeded');
    phase('verify', 'failed');
    publishOp({
      state: 'rolled_back',
      error: { code: 'VERIFY_FAILED', message: 'kubelet not healthy' },
    });
    publishOp({ state: 'rolled_back' }); // a late persist of the same end
    expect(got.map((e) => [e.type, e.reason, e.action])).toEqual([
      ['Normal', 'UpdateStarted', 'Update'],
      ['Normal', 'Switched', 'Update'],
      ['Warning', 'RolledBack', 'Update'],
    ]);
    expect(got[2]?.note).toBe('update rolled back to kube1 (VERIFY_FAILED): kubelet not healthy');
  });

  it('records repair, drain and uncordon operations, and an update’s drain and uncordon phases', () => {
    const { got, publishOp, phase } = follow();
    publishOp({ id: 'op-1', kind: 'update' });
    phase('drain', 'succeeded');
    phase('verify', 'succeeded');
    phase('uncordon', 'succeeded');
    publishOp({ id: 'op-1', kind: 'update', state: 'succeeded' });
    publishOp({ id: 'op-2', kind: 'repair' });
    publishOp({ id: 'op-2', kind: 'repair', state: 'failed', error: { code: 'X', message: 'y' } });
    publishOp({ id: 'op-3', kind: 'drain', state: 'succeeded' });
    publishOp({ id: 'op-4', kind: 'uncordon', state: 'succeeded', result: { outcome: 'uncordoned' } });
    expect(got.map((e) => e.reason)).toEqual([
      'UpdateStarted',
      'Drained',
      'Verified',
      'Uncordoned',
      'UpdateSucceeded',
      'RepairStarted',
      'RepairFailed',
      'Drained',
      'Uncordoned',
    ]);
  });

  it('records a fleet wait only once it lasts longer than the window, then once per window, the same note', async () => {
    const { got, clock, publishOp } = follow();
    const wait = { reason: 'WaitingForSlot' as const, message: 'all 1 slots are held', since: '' };
    publishOp({});
    publishOp({ wait });
    await clock.advance(WINDOW - 1);
    expect(got.map((e) => e.reason)).toEqual(['UpdateStarted']);
    await clock.advance(1);
    await clock.advance(WINDOW);
    expect(got.slice(1)).toEqual([
      {
        type: 'Warning',
        reason: 'WaitingForSlot',
        action: 'WaitForSlot',
        note: 'the update has waited in the fleet gate for longer than 1m: all 1 slots are held',
      },
      expect.objectContaining({ reason: 'WaitingForSlot' }),
    ]);
    expect(got[2]?.note).toBe(got[1]?.note);
    // It holds a slot now: no more wait events, and no hold event before a window passed.
    publishOp({});
    await clock.advance(WINDOW - 1);
    expect(got).toHaveLength(3);
  });

  it('records a slot held for longer than the window, until the update ends', async () => {
    const { got, clock, publishOp, phase, stop } = follow();
    publishOp({});
    phase('slot', 'succeeded');
    await clock.advance(WINDOW);
    expect(got.map((e) => e.reason)).toEqual(['UpdateStarted', 'SlotHeldLong']);
    publishOp({ state: 'succeeded' });
    await clock.advance(WINDOW * 3);
    await settle();
    expect(got.map((e) => e.reason)).toEqual(['UpdateStarted', 'SlotHeldLong', 'UpdateSucceeded']);
    expect(clock.pending).toBe(0);
    stop();
  });
});
