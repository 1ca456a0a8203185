import { expect } from 'vitest';

/**
 * Assert that `sleeps` are the jittered waits of the backoff policy (src/retry/backoff.ts) for
 * the given nominal delays: each one between half its nominal delay and the delay itself.
 */
export function expectBackoff(sleeps: readonly number[], nominal: readonly number[]): void {
  expect(sleeps).toHaveLength(nominal.length);
  sleeps.forEach((ms, i) => {
    const n = nominal[i] ?? 0;
    expect(ms, `wait ${i + 1} of ${JSON.stringify(sleeps)}`).toBeGreaterThanOrEqual(Math.floor(n / 2));
    expect(ms, `wait ${i + 1} of ${JSON.stringify(sleeps)}`).toBeLessThanOrEqual(n);
  });
}
