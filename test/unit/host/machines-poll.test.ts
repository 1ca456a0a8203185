import { describe, expect, it } from 'vitest';
import { AgentError, CancelledError } from '../../../src/errors.js';
import { isCancelled, pollUntil } from '../../../src/host/machines-poll.js';
import { sleepOrCancel } from '../../../src/retry/backoff.js';
import { createFakeClock } from './fake-clock.js';

describe('pollUntil', () => {
  it('returns true as soon as the probe succeeds', async () => {
    const clock = createFakeClock();
    let calls = 0;
    const ok = await pollUntil(
      { clock, deadline: clock.now() + 10_000, intervalMs: 1_000, what: 'x' },
      async () => ++calls === 3,
    );
    expect(ok).toBe(true);
    expect(clock.sleeps).toEqual([1_000, 1_000]);
  });

  it('gives up after the deadline, with a last probe at the deadline', async () => {
    const clock = createFakeClock();
    let calls = 0;
    const ok = await pollUntil(
      { clock, deadline: clock.now() + 2_500, intervalMs: 1_000, what: 'x' },
      async () => {
        calls++;
        return false;
      },
    );
    expect(ok).toBe(false);
    expect(clock.sleeps).toEqual([1_000, 1_000, 500]);
    expect(calls).toBe(4);
  });

  it('throws CANCELLED when the signal is aborted', async () => {
    const clock = createFakeClock();
    const poll = pollUntil(
      {
        clock,
        deadline: clock.now() + 1_000,
        intervalMs: 100,
        signal: AbortSignal.abort(),
        what: 'wait for x',
      },
      async () => false,
    );
    await expect(poll).rejects.toMatchObject({ code: 'CANCELLED' });
  });
});

describe('sleepOrCancel / isCancelled', () => {
  it('turns an aborted sleep into CancelledError', async () => {
    const clock = createFakeClock();
    await expect(sleepOrCancel(clock, 10, AbortSignal.abort(), 'x')).rejects.toBeInstanceOf(CancelledError);
    expect(isCancelled(new CancelledError('x'))).toBe(true);
    expect(isCancelled(new AgentError('TIMEOUT', 'x'))).toBe(false);
    expect(isCancelled(new Error('x'))).toBe(false);
  });
});
