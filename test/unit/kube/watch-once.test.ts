import { getEventListeners } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { watchOnce } from '../../../src/kube/watch-once.js';

/** A watch `open` the test drives: it hands over `stop` when told, and ends when told. */
function scripted() {
  const stop = vi.fn();
  let onDone: ((err: unknown) => void) | null = null;
  let handOver!: (s: () => void) => void;
  let refuse!: (err: unknown) => void;
  const open = vi.fn((done: (err: unknown) => void) => {
    onDone = done;
    return new Promise<() => void>((resolve, reject) => {
      handOver = resolve;
      refuse = reject;
    });
  });
  return {
    open,
    stop,
    opened: () => handOver(stop),
    refuse: (err: unknown) => refuse(err),
    end: (err: unknown) => onDone?.(err),
  };
}

describe('watchOnce', () => {
  it('resolves with the error the watch ended with, and stops it', async () => {
    const w = scripted();
    const run = watchOnce(w.open, new AbortController().signal);
    w.opened();
    await Promise.resolve();
    const err = new Error('500');
    w.end(err);
    expect(await run).toBe(err);
    expect(w.stop).toHaveBeenCalledTimes(1);
  });

  it('resolves null when the server closed the watch', async () => {
    const w = scripted();
    const run = watchOnce(w.open, new AbortController().signal);
    w.opened();
    w.end(null);
    expect(await run).toBeNull();
  });

  it('resolves with the error of a watch that could not be opened', async () => {
    const w = scripted();
    const run = watchOnce(w.open, new AbortController().signal);
    const err = new Error('forbidden');
    w.refuse(err);
    expect(await run).toBe(err);
    expect(w.stop).not.toHaveBeenCalled();
  });

  it('resolves null when the signal aborts, and stops a watch handed over after that at once', async () => {
    const w = scripted();
    const stop = new AbortController();
    const run = watchOnce(w.open, stop.signal);
    stop.abort();
    expect(await run).toBeNull();
    expect(w.stop).not.toHaveBeenCalled();
    w.opened();
    await Promise.resolve();
    expect(w.stop).toHaveBeenCalledTimes(1);
  });

  it('opens nothing on an aborted signal, and leaves no listener on a signal it is run with again and again', async () => {
    const aborted = new AbortController();
    aborted.abort();
    const w = scripted();
    expect(await watchOnce(w.open, aborted.signal)).toBeNull();
    expect(w.open).not.toHaveBeenCalled();

    const signal = new AbortController().signal;
    for (let i = 0; i < 20; i += 1) {
      const x = scripted();
      const run = watchOnce(x.open, signal);
      x.opened();
      x.end(null);
      await run;
    }
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});
