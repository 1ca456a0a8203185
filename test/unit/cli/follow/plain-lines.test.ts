import { describe, expect, it } from 'vitest';
import { createPlainLines } from '../../../../src/cli/follow/plain-lines.js';
import { FollowModel, type ModelChange } from '../../../../src/cli/follow/progress-model.js';
import type { StreamEvent } from '../../../../src/cli/types.js';
import { T0, iso, makeOperation, phase, phaseEvent, progressEvent } from './fixtures.js';

function run(events: (StreamEvent | ReturnType<typeof makeOperation>)[]): string[] {
  const m = new FollowModel();
  const plain = createPlainLines(() => T0, 5000);
  const out: string[] = [];
  for (const e of events) {
    const change: ModelChange | null = 'type' in e ? m.apply(e, T0) : m.applyOperation(e);
    if (change) out.push(...plain.lines(change));
  }
  return out;
}

describe('createPlainLines', () => {
  it('one timestamped line per operation state and phase transition', () => {
    expect(
      run([
        makeOperation({ state: 'pending' }),
        makeOperation({ state: 'running', startedAt: iso(100) }),
        makeOperation({ state: 'running', startedAt: iso(100) }),
        phaseEvent('preflight', 'running', 200),
        phaseEvent('preflight', 'failed', 1700, 'no space left\nmore detail'),
        makeOperation({
          state: 'failed',
          startedAt: iso(100),
          finishedAt: iso(1800),
          error: { code: 'NO_SPACE', message: 'no space left' },
        }),
      ]),
    ).toEqual([
      '2026-03-01T12:00:00.000Z  update op-1 kube1 → kube2 pending',
      '2026-03-01T12:00:00.100Z  update op-1 kube1 → kube2 running',
      '2026-03-01T12:00:00.200Z  phase preflight running',
      '2026-03-01T12:00:01.700Z  phase preflight failed (1.5s): no space left',
      '2026-03-01T12:00:01.800Z  update op-1 kube1 → kube2 failed: no space left',
    ]);
  });

  it('one line each time the reason or message of a wait changes', () => {
    const slot = [phase('slot', 'running', { startedAt: iso(100) })];
    const op = (wait?: { reason: string; message: string; since: number }) =>
      makeOperation({
        state: 'running',
        startedAt: iso(100),
        phases: slot,
        ...(wait ? { wait: { ...wait, since: iso(wait.since) } as never } : {}),
      });
    expect(
      run([
        op(),
        op({
          reason: 'WaitingForSlot',
          message: 'all 3 slots (maxConcurrent) are held by other nodes',
          since: 200,
        }),
        op({
          reason: 'WaitingForSlot',
          message: 'all 3 slots (maxConcurrent) are held by other nodes',
          since: 200,
        }),
        op({
          reason: 'OutsideWindow',
          message: 'outside every maintenance window; the next opens at X',
          since: 900,
        }),
        op(),
        phaseEvent('slot', 'succeeded', 1500),
      ]),
    ).toEqual([
      '2026-03-01T12:00:00.100Z  update op-1 kube1 → kube2 running',
      '2026-03-01T12:00:00.100Z  phase slot running',
      '2026-03-01T12:00:00.200Z  waiting: WaitingForSlot: all 3 slots (maxConcurrent) are held by other nodes',
      '2026-03-01T12:00:00.900Z  waiting: OutsideWindow: outside every maintenance window; the next opens at X',
      '2026-03-01T12:00:01.500Z  phase slot succeeded (1.4s)',
    ]);
  });

  it('few lines per download: first, message changes, every 5 s, and done', () => {
    const total = { totalBytes: 1000 };
    expect(
      run([
        progressEvent('download kubelet', 0, { bytes: 0, ...total }),
        progressEvent('download kubelet', 1000, { bytes: 100, ...total }),
        progressEvent('download kubelet', 5000, { bytes: 500, ...total }),
        progressEvent('download kubelet', 6000, { bytes: 600, ...total }),
        progressEvent('download kubelet', 7000, { bytes: 1000, ...total }),
        progressEvent('download kubelet', 7001, { bytes: 1000, ...total }),
        progressEvent('pull image', 7002, { message: 'applying layer 1/2' }),
        progressEvent('pull image', 7003, { message: 'applying layer 2/2' }),
      ]),
    ).toEqual([
      '2026-03-01T12:00:00.000Z  provision: download kubelet 0 B/1000 B',
      '2026-03-01T12:00:05.000Z  provision: download kubelet 500 B/1000 B 100 B/s',
      '2026-03-01T12:00:07.000Z  provision: download kubelet done 1000 B/1000 B 143 B/s',
      '2026-03-01T12:00:07.002Z  provision: pull image applying layer 1/2',
      '2026-03-01T12:00:07.003Z  provision: pull image applying layer 2/2',
    ]);
  });

  it('following that starts late catches up on the phases so far, then never repeats a line', () => {
    const late = makeOperation({
      state: 'running',
      phases: [
        phase('preflight', 'succeeded', { startedAt: iso(0), finishedAt: iso(1000) }),
        phase('provision', 'running', { startedAt: iso(1000) }),
        phase('verify'),
      ],
    });
    expect(
      run([late, phaseEvent('provision', 'running', 1000), phaseEvent('provision', 'succeeded', 3000)]),
    ).toEqual([
      '2026-03-01T12:00:00.000Z  update op-1 kube1 → kube2 running',
      '2026-03-01T12:00:01.000Z  phase preflight succeeded (1.0s)',
      '2026-03-01T12:00:01.000Z  phase provision running',
      '2026-03-01T12:00:03.000Z  phase provision succeeded (2.0s)',
    ]);
  });

  it('an interrupted operation: its never-run phases end with it, in order, not at the time of following', () => {
    // As recovery leaves it: the running phase failed, the later ones skipped with no time.
    const interrupted = makeOperation({
      state: 'interrupted',
      finishedAt: iso(9000),
      error: { code: 'INTERRUPTED', message: 'agentd stopped' },
      phases: [
        phase('preflight', 'succeeded', { startedAt: iso(0), finishedAt: iso(1000) }),
        phase('provision', 'failed', {
          startedAt: iso(1000),
          finishedAt: iso(9000),
          error: { code: 'CANCELLED', message: 'agentd stopped during this phase' },
        }),
        phase('verify', 'skipped'),
      ],
    });
    // `agentctl ops wait` an hour later.
    const plain = createPlainLines(() => T0 + 3_600_000, 5000);
    const change = new FollowModel().applyOperation(interrupted);
    expect(change && plain.lines(change)).toEqual([
      '2026-03-01T12:00:01.000Z  phase preflight succeeded (1.0s)',
      '2026-03-01T12:00:09.000Z  phase provision failed (8.0s): agentd stopped during this phase',
      '2026-03-01T12:00:09.000Z  phase verify skipped',
      '2026-03-01T12:00:09.000Z  update op-1 kube1 → kube2 interrupted: agentd stopped',
    ]);
  });

  it('snapshots and events that arrive out of order print each transition once, in order', () => {
    const slot = (state: 'running' | 'succeeded', wait: boolean) =>
      makeOperation({
        phases: [
          phase('preflight', 'succeeded', { startedAt: iso(0), finishedAt: iso(1000) }),
          phase('slot', state, {
            startedAt: iso(1000),
            ...(state === 'succeeded' ? { finishedAt: iso(3000) } : {}),
          }),
          phase('verify'),
        ],
        ...(wait ? { wait: { reason: 'WaitingForSlot', message: 'all taken', since: iso(2000) } } : {}),
      });
    expect(
      run([
        // operations.get after subscribing: the slot phase waits.
        slot('running', true),
        // Then what the stream held: its first event, taken when it opened, before preflight
        // ended; the events since, the wait's among them; then the rest.
        makeOperation({
          phases: [phase('preflight', 'running', { startedAt: iso(0) }), phase('slot'), phase('verify')],
        }),
        phaseEvent('preflight', 'succeeded', 1000),
        phaseEvent('slot', 'running', 1000),
        slot('running', false),
        slot('running', true),
        phaseEvent('slot', 'succeeded', 3000),
        slot('succeeded', false),
        phaseEvent('verify', 'running', 4000),
      ]),
    ).toEqual([
      '2026-03-01T12:00:00.000Z  update op-1 kube1 → kube2 running',
      '2026-03-01T12:00:01.000Z  phase preflight succeeded (1.0s)',
      '2026-03-01T12:00:01.000Z  phase slot running',
      '2026-03-01T12:00:02.000Z  waiting: WaitingForSlot: all taken',
      '2026-03-01T12:00:03.000Z  phase slot succeeded (2.0s)',
      '2026-03-01T12:00:04.000Z  phase verify running',
    ]);
  });

  it('a drain has no machine route', () => {
    expect(run([makeOperation({ kind: 'drain', from: 'kube1', to: 'kube1', state: 'running' })])).toEqual([
      '2026-03-01T12:00:00.000Z  drain op-1 running',
    ]);
  });
});
