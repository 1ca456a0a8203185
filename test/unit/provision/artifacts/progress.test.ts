import { describe, expect, it } from 'vitest';
import type { ProgressEvent } from '../../../../src/host/types.js';
import { createByteProgress } from '../../../../src/provision/artifacts/progress.js';

describe('createByteProgress', () => {
  it('emits at most one update per 100 ms of the clock, and always the final count', () => {
    let now = 0;
    const events: ProgressEvent[] = [];
    const clock = { now: () => now, sleep: async () => undefined };
    const p = createByteProgress((e) => events.push(e), clock, 'download kubelet', 1000);
    for (const [t, bytes] of [
      [0, 10],
      [50, 20],
      [99, 30],
      [100, 40],
      [150, 50],
      [260, 60],
    ] as const) {
      now = t;
      p.update(bytes);
    }
    p.done(1000);
    expect(events).toEqual([
      { task: 'download kubelet', bytes: 10, totalBytes: 1000 },
      { task: 'download kubelet', bytes: 40, totalBytes: 1000 },
      { task: 'download kubelet', bytes: 60, totalBytes: 1000 },
      { task: 'download kubelet', bytes: 1000, totalBytes: 1000 },
    ]);
  });

  it('omits totalBytes when the size is unknown and is a no-op without a sink', () => {
    const events: ProgressEvent[] = [];
    const clock = { now: () => 0, sleep: async () => undefined };
    createByteProgress((e) => events.push(e), clock, 'download runc', undefined).done(5);
    expect(events).toEqual([{ task: 'download runc', bytes: 5 }]);
    expect(() => createByteProgress(undefined, clock, 'x', 1).done(1)).not.toThrow();
  });
});
