import { describe, expect, it } from 'vitest';
import { backoffDelay, WATCH_BACKOFF } from '../../../src/retry/backoff.js';

describe('backoffDelay', () => {
  const fixed = (r: number) => ({ ...WATCH_BACKOFF, random: () => r });

  it('doubles from the base and is capped', () => {
    expect([1, 2, 3, 4].map((n) => backoffDelay(n, fixed(1)))).toEqual([500, 1000, 2000, 4000]);
    expect(backoffDelay(7, fixed(1))).toBe(30_000);
    expect(backoffDelay(1000, fixed(1))).toBe(30_000);
  });

  it('keeps the lower half fixed and jitters the upper half', () => {
    expect(backoffDelay(3, fixed(0))).toBe(1000);
    expect(backoffDelay(3, fixed(0.5))).toBe(1500);
    expect(backoffDelay(50, fixed(0))).toBe(15_000);
  });

  it('treats attempts below 1 as the first and clamps a bad random source', () => {
    expect(backoffDelay(0, fixed(1))).toBe(500);
    expect(backoffDelay(1, fixed(7))).toBe(500);
    expect(backoffDelay(1, fixed(-3))).toBe(250);
  });
});
