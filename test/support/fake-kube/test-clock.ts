/**
 * A `Clock` for tests whose `sleep(ms)` returns at once after moving time forward by `ms`, so
 * timeouts, polls and backoffs run through in a few event-loop turns and never wait for real.
 */
import type { Clock } from '../../../src/host/types.js';

export interface TestClock extends Clock {
  /** Every sleep requested, in order (ms). */
  readonly sleeps: number[];
  /** Move time forward without sleeping. */
  advance(ms: number): void;
}

export function createTestClock(startMs = Date.UTC(2026, 0, 1)): TestClock {
  let now = startMs;
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => now,
    advance(ms) {
      now += ms;
    },
    async sleep(ms, signal) {
      signal?.throwIfAborted();
      sleeps.push(ms);
      now += ms;
      // Yield a macrotask so real I/O (the fake server's answers) can make progress meanwhile.
      await new Promise((resolve) => setImmediate(resolve));
      signal?.throwIfAborted();
    },
  };
}
