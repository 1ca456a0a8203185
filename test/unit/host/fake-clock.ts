/** A clock whose sleeps return at once and move time forward, so polls and timeouts run instantly. */
import type { Clock } from '../../../src/host/types.js';

export interface FakeClock extends Clock {
  /** Every sleep requested, in order (ms). */
  readonly sleeps: number[];
  /** Move time forward without sleeping (timeouts and ages measured on this clock). */
  advance(ms: number): void;
}

export function createFakeClock(start = 1_700_000_000_000): FakeClock {
  let now = start;
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
    async sleep(ms: number, signal?: AbortSignal): Promise<void> {
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      sleeps.push(ms);
      now += ms;
      await Promise.resolve();
    },
  };
}
