import { describe, expect, it } from 'vitest';
import { CancelledError, DownloadFailedError } from '../../../../src/errors.js';
import { runLimited } from '../../../../src/provision/artifacts/run-limited.js';

/** A promise with its resolve/reject exposed. */
function deferred<T = void>(): {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
} {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('runLimited', () => {
  it('never has more than `limit` items in flight and keeps result order', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const gates = Array.from({ length: 7 }, () => deferred());
    const run = runLimited([0, 1, 2, 3, 4, 5, 6], 3, undefined, async (item) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await gates[item]!.promise;
      inFlight--;
      return item * 10;
    });
    // Release in reverse order so completion order differs from item order.
    for (let i = 6; i >= 0; i--) {
      await new Promise((r) => setImmediate(r));
      gates[i]!.resolve();
    }
    for (const g of gates) g.resolve();
    expect(await run).toEqual([0, 10, 20, 30, 40, 50, 60]);
    expect(maxInFlight).toBe(3);
  });

  it('on a failure aborts the others, waits for them, and rethrows the real cause', async () => {
    const cleanedUp: number[] = [];
    const run = runLimited([0, 1, 2], 3, undefined, async (item, _i, signal) => {
      if (item === 1) {
        await new Promise((r) => setImmediate(r));
        throw new DownloadFailedError('item 1 failed');
      }
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      cleanedUp.push(item);
      throw new CancelledError(`item ${item}`);
    });
    await expect(run).rejects.toMatchObject({ code: 'DOWNLOAD_FAILED' });
    expect(cleanedUp.sort()).toEqual([0, 2]);
  });

  it('does not start items after the outer signal aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    let started = 0;
    const run = runLimited([1, 2], 1, controller.signal, async () => {
      started++;
    });
    await expect(run).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(started).toBe(0);
  });
});
