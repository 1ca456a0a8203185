/**
 * A level-free wake-up: `fire()` wakes everyone waiting in `next()` now; a later `next()` waits
 * for the next `fire()`. Waiters re-read state themselves (level-based), so a fire between two
 * looks is never lost as long as they look before waiting again.
 */
export class Pulse {
  private waiters = new Set<() => void>();

  fire(): void {
    const woken = [...this.waiters];
    this.waiters.clear();
    for (const wake of woken) wake();
  }

  /** Resolves at the next `fire()`, or when `signal` aborts (never rejects). */
  next(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        this.waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
