import { getEventListeners } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { watchFailure, watchOnce, WATCH_ESTABLISHED_AFTER_MS } from '../../../src/kube/watch-once.js';
import { createManualClock } from '../../support/manual-clock.js';

/** A watch `open` the test drives: it hands over `stop` when told, delivers and ends when told. */
function scripted() {
  const stop = vi.fn();
  let onDone: ((err: unknown) => void) | null = null;
  let onEvent: (() => void) | null = null;
  let handOver!: (s: () => void) => void;
  let refuse!: (err: unknown) => void;
  const open = vi.fn((done: (err: unknown) => void, delivered: () => void) => {
    onDone = done;
    onEvent = delivered;
    return new Promise<() => void>((resolve, reject) => {
      handOver = resolve;
      refuse = reject;
    });
  });
  return {
    open,
    stop,
    opened: async () => {
      handOver(stop);
      await Promise.resolve();
    },
    refuse: (err: unknown) => refuse(err),
    deliver: () => onEvent?.(),
    end: (err: unknown) => onDone?.(err),
  };
}

describe('watchOnce', () => {
  const clock = createManualClock();
  const live = () => new AbortController().signal;

  it('ends with the error the watch ended with, and stops it', async () => {
    const w = scripted();
    const run = watchOnce(w.open, live(), { clock });
    await w.opened();
    const err = new Error('500');
    w.end(err);
    expect(await run).toEqual({ end: err, established: false });
    expect(w.stop).toHaveBeenCalledTimes(1);
  });

  it('is established by an event after the list, or by staying open long enough, not by being answered', async () => {
    const quiet = scripted();
    const a = watchOnce(quiet.open, live(), { clock });
    await quiet.opened();
    quiet.end(null);
    expect(await a).toEqual({ end: null, established: false });

    const eventful = scripted();
    const b = watchOnce(eventful.open, live(), { clock });
    await eventful.opened();
    eventful.deliver();
    eventful.end(null);
    expect(await b).toEqual({ end: null, established: true });

    const long = scripted();
    const c = watchOnce(long.open, live(), { clock });
    await long.opened();
    await clock.advance(WATCH_ESTABLISHED_AFTER_MS);
    long.end(null);
    expect(await c).toEqual({ end: null, established: true });
  });

  it('ends with the error of a watch that could not be opened', async () => {
    const w = scripted();
    const run = watchOnce(w.open, live(), { clock });
    const err = new Error('forbidden');
    w.refuse(err);
    expect((await run).end).toBe(err);
    expect(w.stop).not.toHaveBeenCalled();
  });

  it('ends when the signal aborts, and stops a watch handed over after that at once', async () => {
    const w = scripted();
    const stop = new AbortController();
    const run = watchOnce(w.open, stop.signal, { clock });
    stop.abort();
    expect((await run).end).toBeNull();
    expect(w.stop).not.toHaveBeenCalled();
    await w.opened();
    expect(w.stop).toHaveBeenCalledTimes(1);
  });

  it('opens nothing on an aborted signal, and leaves no listener on a signal it is run with again and again', async () => {
    const aborted = new AbortController();
    aborted.abort();
    const w = scripted();
    expect(await watchOnce(w.open, aborted.signal, { clock })).toEqual({ end: null, established: false });
    expect(w.open).not.toHaveBeenCalled();

    const signal = live();
    for (let i = 0; i < 20; i += 1) {
      const x = scripted();
      const run = watchOnce(x.open, signal, { clock });
      await x.opened();
      x.end(null);
      await run;
    }
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});

describe('watchFailure', () => {
  it('resumes an established watch the server ended; anything else is a failure to back off from', () => {
    expect(watchFailure({ end: null, established: true }, 'Node w1')).toBeNull();
    const err = new Error('500');
    expect(watchFailure({ end: err, established: true }, 'Node w1')).toBe(err);
    expect(watchFailure({ end: null, established: false }, 'Node w1')).toMatchObject({
      code: 'KUBE_UNAVAILABLE',
      message: 'watch Node w1: the API server closed the watch before it delivered anything',
      data: { reason: 'WatchClosed' },
    });
  });
});
