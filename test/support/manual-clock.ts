/**
 * A `Clock` whose time moves only when the test says so: `sleep(ms)` waits until `advance` has
 * moved time past its deadline. Unlike the fake API server's test clock (every sleep moves time
 * for everyone), many parts sleeping at once see one consistent time, as with a real clock.
 */
import type { Clock } from '../../src/host/types.js';

export interface ManualClock extends Clock {
  /** Move time forward by `ms`, waking every sleeper whose deadline passed, in deadline order. */
  advance(ms: number): Promise<void>;
  /** Sleepers waiting now. */
  readonly pending: number;
}

interface Sleeper {
  at: number;
  wake: () => void;
}

/** Let promise chains and pending I/O callbacks run. */
export async function settle(turns = 3): Promise<void> {
  for (let i = 0; i < turns; i += 1) await new Promise((resolve) => setImmediate(resolve));
}

export function createManualClock(startMs = Date.UTC(2026, 10, 25, 12, 0, 0)): ManualClock {
  let now = startMs;
  let sleepers: Sleeper[] = [];
  return {
    now: () => now,
    get pending() {
      return sleepers.length;
    },
    sleep(ms, signal) {
      return new Promise<void>((resolve, reject) => {
        if (signal?.aborted) {
          reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
          return;
        }
        const s: Sleeper = {
          at: now + Math.max(0, ms),
          wake: () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
        };
        const onAbort = (): void => {
          sleepers = sleepers.filter((x) => x !== s);
          reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        sleepers.push(s);
      });
    },
    async advance(ms) {
      const target = now + ms;
      for (;;) {
        const due = sleepers.filter((s) => s.at <= target).sort((a, b) => a.at - b.at)[0];
        if (due === undefined) break;
        now = Math.max(now, due.at);
        sleepers = sleepers.filter((s) => s !== due);
        due.wake();
        await settle();
      }
      now = target;
    },
  };
}
