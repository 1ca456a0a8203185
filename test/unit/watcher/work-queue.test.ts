// No API server: only the fake API server’s test clock (test/support/fake-kube/test-clock.ts).
import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../../src/watcher/work-queue.js';
import type { ProcessResult } from '../../../src/watcher/work-queue.js';
import { createTestClock } from '../../support/fake-kube.js';
import { createManualClock, settle } from '../../support/manual-clock.js';

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !check(); i += 1) await new Promise((r) => setImmediate(r));
  expect(check()).toBe(true);
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('WorkQueue', () => {
  it('processes a key added during processing exactly once more, however often it was added', async () => {
    const clock = createTestClock();
    const gates = [deferred(), deferred()];
    let runs = 0;
    let concurrent = 0;
    let maxConcurrent = 0;
    const q = new WorkQueue({
      clock,
      backoff: { baseMs: 100, maxMs: 1000 },
      process: async () => {
        concurrent += 1;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        await gates[runs]?.promise;
        runs += 1;
        concurrent -= 1;
        return undefined;
      },
    });
    q.start();
    q.add('m');
    await until(() => q.processing === 'm');
    q.add('m');
    q.add('m');
    q.add('m');
    expect(q.length).toBe(1);
    gates[0]?.resolve();
    gates[1]?.resolve();
    await until(() => runs === 2 && q.processing === null);
    await q.stop();
    expect(runs).toBe(2);
    expect(maxConcurrent).toBe(1);
  });

  it('retries a failing key with growing backoff and forgets the failures after a success', async () => {
    const clock = createTestClock();
    const errors: number[] = [];
    let n = 0;
    const q = new WorkQueue({
      clock,
      backoff: { baseMs: 100, maxMs: 1000, random: () => 1 },
      process: async () => {
        n += 1;
        if (n <= 3) throw new Error(`fail ${n}`);
        return undefined;
      },
      onError: (_key, _err, retryInMs) => errors.push(retryInMs),
    });
    q.start();
    q.add('m');
    await until(() => n === 4);
    expect(errors).toEqual([100, 200, 400]);
    expect(clock.sleeps).toEqual([100, 200, 400]);
    await q.stop();
  });

  it('requeues after the delay a key asks for', async () => {
    const clock = createTestClock();
    const results: Array<ProcessResult | undefined> = [{ requeueAfterMs: 2500 }, undefined];
    let n = 0;
    const q = new WorkQueue({
      clock,
      backoff: { baseMs: 100, maxMs: 1000 },
      process: async () => results[n++],
    });
    q.start();
    q.add('m');
    await until(() => n === 2);
    expect(clock.sleeps).toEqual([2500]);
    await q.stop();
  });

  it('stop aborts the key being processed, drops delayed keys and ignores new ones', async () => {
    const clock = createTestClock();
    let seen: AbortSignal | undefined;
    let n = 0;
    const q = new WorkQueue({
      clock,
      backoff: { baseMs: 100, maxMs: 1000 },
      process: (_key, signal) => {
        n += 1;
        seen = signal;
        return new Promise((_resolve, reject) =>
          signal.addEventListener('abort', () => reject(new Error('aborted'))),
        );
      },
    });
    q.start();
    q.add('m');
    await until(() => seen !== undefined);
    await q.stop();
    expect(seen?.aborted).toBe(true);
    q.add('m');
    q.addAfter('m', 10);
    await new Promise((r) => setImmediate(r));
    expect(n).toBe(1);
  });

  it('runs a key once, at the shorter delay, when a shorter one supersedes a longer one', async () => {
    const clock = createManualClock();
    const runs: number[] = [];
    const start = clock.now();
    const q = new WorkQueue({
      clock,
      backoff: { baseMs: 100, maxMs: 1000 },
      process: async () => {
        runs.push(clock.now() - start);
        return undefined;
      },
    });
    q.start();
    q.addAfter('m', 1000);
    q.addAfter('m', 100);
    // The superseded delay's timer is gone, not merely ignored.
    expect(clock.pending).toBe(1);
    await clock.advance(100);
    await settle();
    expect(runs).toEqual([100]);
    await clock.advance(2000);
    await settle();
    expect(runs).toEqual([100]);
    // A longer delay than the pending one changes nothing.
    q.addAfter('m', 100);
    q.addAfter('m', 1000);
    expect(clock.pending).toBe(1);
    await clock.advance(5000);
    await settle();
    expect(runs).toEqual([100, 2200]);
    await q.stop();
  });
});
