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
