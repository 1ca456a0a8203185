import { describe, expect, it } from 'vitest';
import { CancelledError } from '../../../src/errors.js';
import { backoffDelay, raceAbort, WATCH_BACKOFF } from '../../../src/retry/backoff.js';

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

describe('raceAbort', () => {
  it('settles with the work when the signal stays quiet, and with no signal at all', async () => {
    expect(await raceAbort(Promise.resolve(1), new AbortController().signal, 'x')).toBe(1);
    expect(await raceAbort(Promise.resolve(2), undefined, 'x')).toBe(2);
    await expect(
      raceAbort(Promise.reject(new Error('boom')), new AbortController().signal, 'x'),
    ).rejects.toThrow('boom');
  });

  it('rejects with CANCELLED naming what was awaited as soon as the signal aborts, the work still pending', async () => {
    const ac = new AbortController();
    const pending = raceAbort(new Promise(() => undefined), ac.signal, 'connect to kube1');
    ac.abort(new Error('shutting down'));
    const err = await pending.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CancelledError);
    expect((err as Error).message).toBe('connect to kube1: cancelled');
  });

  it('rejects at once for a signal already aborted, and leaves no unhandled rejection of the work', async () => {
    const ac = new AbortController();
    ac.abort();
    const work = Promise.reject(new Error('late failure'));
    await expect(raceAbort(work, ac.signal, 'x')).rejects.toBeInstanceOf(CancelledError);
  });
});
