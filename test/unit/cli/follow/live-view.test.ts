import { describe, expect, it } from 'vitest';
import { createLiveView, renderLiveLines } from '../../../../src/cli/follow/live-view.js';
import { FollowModel } from '../../../../src/cli/follow/progress-model.js';
import type { ProgressStream } from '../../../../src/cli/output.js';
import { T0, iso, makeOperation, phase, phaseEvent, progressEvent } from './fixtures.js';

const plain: ProgressStream['paint'] = (w) => w;

function model(): FollowModel {
  const m = new FollowModel();
  m.applyOperation(
    makeOperation({
      phases: [
        phase('preflight', 'succeeded', { startedAt: iso(0), finishedAt: iso(1500) }),
        phase('provision', 'running', { startedAt: iso(1500) }),
        phase('drain', 'skipped'),
        phase('verify'),
      ],
    }),
  );
  m.apply(progressEvent('download kubelet', 2000, { bytes: 0, totalBytes: 2 * 1024 * 1024 }), T0);
  m.apply(progressEvent('download kubelet', 4000, { bytes: 1024 * 1024, totalBytes: 2 * 1024 * 1024 }), T0);
  m.apply(progressEvent('download crictl', 4000, { bytes: 10, totalBytes: 10 }), T0);
  return m;
}

describe('renderLiveLines', () => {
  it('shows the operation, every phase with its state and elapsed time, and moving downloads', () => {
    expect(renderLiveLines(model(), T0 + 5000, plain)).toEqual([
      'update op-1  kube1 → kube2  running  5.0s',
      '  ✓ preflight  succeeded  1.5s',
      '  ▸ provision  running    3.5s',
      '      download kubelet  1.0 MiB / 2.0 MiB  50%  512.0 KiB/s',
      '  - drain      skipped',
      '  · verify     pending',
    ]);
  });

  it('shows why the running phase waits, and follows the reason as it changes', () => {
    const m = new FollowModel();
    const waiting = (reason: string, message: string, since: number) =>
      makeOperation({
        phases: [
          phase('stage', 'succeeded', { startedAt: iso(0), finishedAt: iso(1000) }),
          phase('slot', 'running', { startedAt: iso(1000) }),
          phase('stop'),
        ],
        wait: { reason, message, since: iso(since) } as never,
      });
    m.applyOperation(waiting('WaitingForSlot', 'all 3 slots (maxConcurrent) are held by other nodes', 1000));
    expect(renderLiveLines(m, T0 + 4000, plain)).toEqual([
      'update op-1  kube1 → kube2  running  4.0s',
      '  ✓ stage  succeeded  1.0s',
      '  ▸ slot   running    3.0s',
      '      waiting: WaitingForSlot  all 3 slots (maxConcurrent) are held by other nodes  3.0s',
      '  · stop   pending',
    ]);
    m.applyOperation(waiting('Paused', 'the fleet policy says paused: true (agentctl fleet resume)', 5000));
    expect(renderLiveLines(m, T0 + 6000, plain)[3]).toBe(
      '      waiting: Paused  the fleet policy says paused: true (agentctl fleet resume)  1.0s',
    );
    // The wait is over: the line goes.
    m.applyOperation(
      makeOperation({
        phases: [
          phase('stage', 'succeeded', { startedAt: iso(0), finishedAt: iso(1000) }),
          phase('slot', 'succeeded', { startedAt: iso(1000), finishedAt: iso(7000) }),
          phase('stop', 'running', { startedAt: iso(7000) }),
        ],
      }),
    );
    expect(renderLiveLines(m, T0 + 7000, plain).join('\n')).not.toContain('waiting');
  });

  it('shows the first line of a failed phase error', () => {
    const m = new FollowModel();
    m.applyOperation(makeOperation({ phases: [phase('start', 'running', { startedAt: iso(0) })] }));
    m.apply(phaseEvent('start', 'failed', 2000, 'machinectl start kube2: exit 1\nsee journalctl'), T0);
    expect(renderLiveLines(m, T0 + 3000, plain).slice(1)).toEqual([
      '  ✗ start  failed     2.0s',
      '      machinectl start kube2: exit 1',
    ]);
  });

  it('colors state words with the given painter', () => {
    const lines = renderLiveLines(model(), T0 + 5000, (w, tone) => `<${tone}>${w}`);
    expect(lines[1]).toContain('<good>succeeded');
    expect(lines[2]).toContain('<good>running');
  });

  it('says it is waiting before the operation is known', () => {
    expect(renderLiveLines(new FollowModel(), T0, plain)).toEqual(['waiting for the operation…']);
  });
});

describe('createLiveView', () => {
  it('redraws in place: cursor up over the previous drawing, clear, draw; lines fit the width', () => {
    let written = '';
    const stream: ProgressStream = {
      tty: true,
      color: false,
      columns: 30,
      write: (t) => void (written += t),
      paint: plain,
    };
    const m = model();
    const view = createLiveView({ model: m, stream, now: () => T0 + 5000, tickMs: 60_000 });
    view.update();
    const first = written;
    expect(first.split('\n')).toHaveLength(7);
    for (const line of first.split('\n')) expect(line.length).toBeLessThanOrEqual(30);
    view.finish();
    expect(written.slice(first.length).startsWith('\u001b[6A\r\u001b[J')).toBe(true);
  });
});
