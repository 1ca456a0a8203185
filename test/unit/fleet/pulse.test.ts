import { describe, expect, it } from 'vitest';
import { Pulse } from '../../../src/fleet/pulse.js';

describe('Pulse', () => {
  it('wakes every waiter at the next fire, and only waiters that wait by then', async () => {
    const pulse = new Pulse();
    const woken: string[] = [];
    const ac = new AbortController();
    const a = pulse.next(ac.signal).then(() => woken.push('a'));
    const b = pulse.next(ac.signal).then(() => woken.push('b'));
    pulse.fire();
    await Promise.all([a, b]);
    expect(woken).toEqual(['a', 'b']);
    let late = false;
    void pulse.next(ac.signal).then(() => (late = true));
    await Promise.resolve();
    expect(late).toBe(false);
  });

  it('resolves (never rejects) when the signal aborts', async () => {
    const pulse = new Pulse();
    const ac = new AbortController();
    const waiting = pulse.next(ac.signal);
    ac.abort();
    await expect(waiting).resolves.toBeUndefined();
    await expect(pulse.next(ac.signal)).resolves.toBeUndefined();
  });
});
