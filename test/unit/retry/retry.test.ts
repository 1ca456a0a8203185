// No API server: only the fake API server’s test clock (test/support/fake-kube/test-clock.ts).
import { describe, expect, it } from 'vitest';
import { Backoff, retry } from '../../../src/retry/backoff.js';
import { errorCode, isRetryableNetworkError, isRetryableStatus } from '../../../src/retry/retryable.js';
import { createTestClock } from '../../support/fake-kube.js';

const fixed = { baseMs: 100, maxMs: 300, random: () => 1 };

describe('Backoff', () => {
  it('grows per failure, is capped, and starts over after reset', () => {
    const b = new Backoff(fixed);
    expect([b.next(), b.next(), b.next(), b.next()]).toEqual([100, 200, 300, 300]);
    expect(b.failures).toBe(4);
    b.reset();
    expect(b.next()).toBe(100);
  });
});

describe('retry', () => {
  it('retries what is retryable, with the policy on the injected clock, then succeeds', async () => {
    const clock = createTestClock();
    const seen: number[] = [];
    const result = await retry(
      async (n) => {
        if (n < 2) throw Object.assign(new Error('reset'), { code: 'ECONNRESET' });
        return 'ok';
      },
      {
        what: 'get x',
        policy: fixed,
        retries: 3,
        clock,
        isRetryable: isRetryableNetworkError,
        onRetry: (_e, attempt) => seen.push(attempt),
      },
    );
    expect(result).toBe('ok');
    expect(clock.sleeps).toEqual([100, 200]);
    expect(seen).toEqual([1, 2]);
  });

  it('gives up after the retries, or at once on a final error, throwing the classified error', async () => {
    const clock = createTestClock();
    const attempts: number[] = [];
    const err = await retry(
      async (n) => {
        attempts.push(n);
        throw Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
      },
      {
        what: 'get x',
        policy: fixed,
        retries: 2,
        clock,
        isRetryable: (e) => (e as Error).message === 'classified',
        classify: () => new Error('classified'),
      },
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe('classified');
    expect(attempts).toEqual([0, 1, 2]);
    const final = await retry(
      async () => {
        throw new Error('404');
      },
      { what: 'get x', policy: fixed, retries: 5, clock, isRetryable: () => false },
    ).catch((e: unknown) => e);
    expect((final as Error).message).toBe('404');
    expect(clock.sleeps).toEqual([100, 200]);
  });

  it('turns an abort during the wait into CANCELLED naming what was being done', async () => {
    const controller = new AbortController();
    const clock = createTestClock();
    const err = await retry(
      async () => {
        controller.abort();
        throw Object.assign(new Error('reset'), { code: 'ECONNRESET' });
      },
      { what: 'get x', policy: fixed, retries: 3, clock, signal: controller.signal, isRetryable: () => true },
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CANCELLED', message: 'get x: cancelled' });
  });
});

describe('the retryable list', () => {
  it('finds network codes in the cause chain', () => {
    const inner = Object.assign(new Error('socket hang up'), { code: 'UND_ERR_SOCKET' });
    expect(errorCode(new Error('fetch failed', { cause: inner }))).toBe('UND_ERR_SOCKET');
    expect(isRetryableNetworkError(new Error('fetch failed', { cause: inner }))).toBe(true);
    expect(isRetryableNetworkError(Object.assign(new Error('x'), { code: 'ENOENT' }))).toBe(false);
    expect(isRetryableNetworkError('ECONNRESET')).toBe(false);
  });

  it('takes 408, 429 and 5xx as "later", other statuses as final', () => {
    expect([408, 429, 500, 503, 599].every(isRetryableStatus)).toBe(true);
    expect([400, 401, 403, 404, 409, 410].some(isRetryableStatus)).toBe(false);
  });
});
