/** guardTransfer (src/outbound-http.ts): the bounds of one call, judged on a manual clock. */
import { describe, expect, it } from 'vitest';
import { guardTransfer } from '../../src/outbound-http.js';
import { createManualClock, settle } from '../support/manual-clock.js';

const LIMITS = { minRateBytesPerSecond: 1000, rateWindowMs: 10_000, requestTimeoutMs: 30_000 };

/** The judge re-arms its timer a few turns after `startBody`: let it, before time moves. */
async function started(g: ReturnType<typeof guardTransfer>, limit: number, declared?: number): Promise<void> {
  g.startBody(limit, declared);
  await settle();
}

function guard(clock = createManualClock()) {
  const g = guardTransfer({
    what: 'download kubelet 1.34.0',
    url: 'http://mirror/kubelet',
    clock,
    limits: LIMITS,
    makeError: (message, data) => Object.assign(new Error(message), { data }),
  });
  return { g, clock };
}

describe('guardTransfer', () => {
  it('a body at the floor rate is never stopped, window after window', async () => {
    const { g, clock } = guard();
    await started(g, 1_000_000, 1_000_000);
    for (let i = 0; i < 12; i++) {
      g.received(10_000); // exactly 1000 B/s over each 10 s window
      await clock.advance(10_000);
      await settle();
    }
    expect(g.failure).toBeUndefined();
    expect(g.signal.aborted).toBe(false);
    g.end();
    expect(clock.pending).toBe(0);
  });

  it('a window short of the floor aborts the signal with the failure as its reason', async () => {
    const { g, clock } = guard();
    await started(g, 1_000_000, 1_000_000);
    g.received(10_000);
    await clock.advance(10_000);
    g.received(9_999);
    await clock.advance(10_000);
    expect(g.signal.aborted).toBe(true);
    expect(g.signal.reason).toBe(g.failure);
    expect((g.failure as Error & { data: unknown }).data).toMatchObject({ receivedBytes: 19_999 });
    expect(g.failure?.message).toContain(
      'too slow, 9999 bytes in the last 10s (received 19999 bytes in all)',
    );
  });

  it('the deadline grows by the declared size at the floor rate; more than declared fails at once', async () => {
    const { g, clock } = guard();
    await started(g, 100_000, 100_000); // 100 s at 1000 B/s: a deadline of 30 s + 100 s
    for (let i = 0; i < 7; i++) {
      g.received(10_000);
      await clock.advance(10_000);
    }
    // 70 s in, past the 30 s of a call without a body, and not stopped.
    expect(g.failure).toBeUndefined();
    expect(() => g.received(30_001)).toThrow('received 100001 bytes, more than its limit of 100000 bytes');
    expect(g.signal.aborted).toBe(true);
  });

  it('without a body, the call ends at its deadline', async () => {
    const { g, clock } = guard();
    await clock.advance(29_999);
    expect(g.failure).toBeUndefined();
    await clock.advance(1);
    expect(g.failure?.message).toContain('past its deadline of 30s');
  });
});
