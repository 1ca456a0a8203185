import { describe, expect, it } from 'vitest';
import { FollowModel } from '../../../../src/cli/follow/progress-model.js';
import { T0, iso, makeOperation, phase, phaseEvent, progressEvent } from './fixtures.js';

describe('FollowModel', () => {
  it('takes phases from an operation snapshot and times from phase events', () => {
    const m = new FollowModel();
    expect(m.applyOperation(makeOperation())).toMatchObject({ kind: 'operation', previousState: null });
    expect(m.phases.map((p) => p.name)).toEqual(['preflight', 'provision', 'verify']);
    m.apply(phaseEvent('preflight', 'running', 1000), T0);
    const change = m.apply(phaseEvent('preflight', 'succeeded', 2500), T0);
    expect(change).toMatchObject({ kind: 'phase', at: T0 + 2500 });
    expect(m.phases[0]).toEqual({
      name: 'preflight',
      state: 'succeeded',
      startedAt: T0 + 1000,
      finishedAt: T0 + 2500,
      error: null,
    });
  });

  it('records a phase error and phases it did not know yet', () => {
    const m = new FollowModel();
    m.applyOperation(makeOperation());
    m.apply(phaseEvent('rollback', 'failed', 10, 'source did not come back'), T0);
    expect(m.phases.at(-1)).toMatchObject({
      name: 'rollback',
      state: 'failed',
      error: 'source did not come back',
    });
  });

  it('never moves the operation backwards (a late snapshot of an older state)', () => {
    const m = new FollowModel();
    m.applyOperation(makeOperation({ state: 'running' }));
    expect(m.applyOperation(makeOperation({ state: 'pending' }))).toBeNull();
    expect(m.operation?.state).toBe('running');
    expect(m.applyOperation(makeOperation({ state: 'succeeded' }))).toMatchObject({
      previousState: 'running',
    });
  });

  it('never moves a phase backwards: an older snapshot of the same state, or an older phase event', () => {
    const m = new FollowModel();
    const later = makeOperation({
      phases: [
        phase('preflight', 'succeeded', { startedAt: iso(0), finishedAt: iso(1000) }),
        phase('provision', 'running', { startedAt: iso(1000) }),
        phase('verify'),
      ],
    });
    const earlier = makeOperation({
      phases: [phase('preflight', 'running', { startedAt: iso(0) }), phase('provision'), phase('verify')],
    });
    m.applyOperation(later);
    // The stream's first event, taken when it opened, before the snapshot already applied.
    expect(m.applyOperation(earlier)).toBeNull();
    expect(m.operation).toBe(later);
    // An event that waited in the stream meanwhile.
    expect(m.apply(phaseEvent('preflight', 'running', 0), T0)).toBeNull();
    expect(m.phases.map((p) => [p.name, p.state])).toEqual([
      ['preflight', 'succeeded'],
      ['provision', 'running'],
      ['verify', 'pending'],
    ]);
    // What comes after goes on as usual.
    expect(m.apply(phaseEvent('provision', 'succeeded', 2000), T0)).toMatchObject({ kind: 'phase' });
    expect(m.phases[1]).toMatchObject({ state: 'succeeded', finishedAt: T0 + 2000 });
  });

  it('ignores events of another operation', () => {
    const m = new FollowModel();
    m.applyOperation(makeOperation());
    expect(
      m.apply({ type: 'phase', operationId: 'op-2', phase: 'preflight', state: 'running', at: '' }, T0),
    ).toBeNull();
    expect(m.applyOperation(makeOperation({ id: 'op-2' }))).toBeNull();
    expect(m.phases[0]?.state).toBe('pending');
  });

  it('tracks bytes and the rate of a download, and when it is done', () => {
    const m = new FollowModel();
    m.applyOperation(makeOperation({ phases: [phase('provision', 'running')] }));
    m.apply(progressEvent('download kubelet', 0, { bytes: 0, totalBytes: 4000 }), T0);
    expect(m.activeTasks('provision')[0]?.rate).toBeNull();
    m.apply(progressEvent('download kubelet', 2000, { bytes: 2000, totalBytes: 4000 }), T0);
    expect(m.activeTasks('provision')).toEqual([
      expect.objectContaining({ task: 'download kubelet', bytes: 2000, totalBytes: 4000, rate: 1000 }),
    ]);
    m.apply(progressEvent('download kubelet', 3000, { bytes: 4000, totalBytes: 4000 }), T0);
    expect(m.activeTasks('provision')).toEqual([]);
  });

  it('keeps a task message', () => {
    const m = new FollowModel();
    m.apply(progressEvent('pull image', 0, { message: 'applying layer 1/2' }), T0);
    expect(m.activeTasks('provision')[0]).toMatchObject({ message: 'applying layer 1/2', bytes: null });
  });
});
