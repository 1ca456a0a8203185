/**
 * One run of a list+watch (src/kube/list-watch.ts) inside a caller's restart loop: the fleet's
 * policy and slot watches and the watch of this node's cordon each loop over it with their own
 * backoff. No client code is loaded here.
 *
 * The loops follow the Machine watcher's rule (docs/watcher.md): a failure streak ends only once
 * a watch is **established** — it delivered an event after its list, or stayed open
 * `establishedAfterMs` — never because a list was answered. A watch the server ends after that
 * resumes at once; one it ends before is a failure like any other, so an API server or proxy
 * that accepts watches and drops them at once sees fewer and fewer requests, not a storm.
 */
import { KubeUnavailableError } from '../errors.js';
import type { Clock } from '../host/types.js';

/** A watch open this long counts as established even without events (as the Machine watcher's). */
export const WATCH_ESTABLISHED_AFTER_MS = 30_000;

/** How one run of a watch ended. */
export interface WatchRun {
  /** Its error; null when the server closed it or the signal aborted. */
  end: unknown;
  /** It delivered an event after its list, or stayed open `establishedAfterMs`. */
  established: boolean;
}

/**
 * Open a watch with `open` and resolve when it ends: `open` gets `onDone`, to call once when the
 * watch ends by itself (null: the server closed it), and `delivered`, to call for every event
 * after the list. The watch is stopped before this resolves, and one that `open` hands over late
 * is stopped at once. Never rejects: a watch that cannot be opened ends with that error.
 */
export async function watchOnce(
  open: (onDone: (err: unknown) => void, delivered: () => void) => Promise<() => void>,
  signal: AbortSignal,
  o: { clock: Pick<Clock, 'now'>; establishedAfterMs?: number },
): Promise<WatchRun> {
  if (signal.aborted) return { end: null, established: false };
  let stop: (() => void) | null = null;
  let ended = false;
  let established = false;
  // From the request on: a list that takes its time counts too, and a test that moves the clock
  // once the server holds the watch does not race the client's answer.
  const openedAt = o.clock.now();
  let onAbort: (() => void) | null = null;
  try {
    const end = await new Promise<unknown>((resolve) => {
      onAbort = () => resolve(null);
      signal.addEventListener('abort', onAbort, { once: true });
      open(
        (err) => resolve(err),
        () => {
          established = true;
        },
      ).then(
        (s) => {
          if (ended) s();
          else stop = s;
        },
        (err: unknown) => resolve(err ?? new Error('watch failed')),
      );
    });
    const openFor = openedAt === null ? 0 : o.clock.now() - openedAt;
    return {
      end,
      established: established || openFor >= (o.establishedAfterMs ?? WATCH_ESTABLISHED_AFTER_MS),
    };
  } finally {
    ended = true;
    if (onAbort !== null) signal.removeEventListener('abort', onAbort);
    (stop as (() => void) | null)?.();
  }
}

/**
 * What a restart loop retries after a run: the run's error, or, for a watch the server closed
 * before it was established, an error that says so. Null when the watch resumes at once.
 */
export function watchFailure(run: WatchRun, what: string): unknown {
  if (run.end !== null) return run.end;
  if (run.established) return null;
  return new KubeUnavailableError(
    `watch ${what}: the API server closed the watch before it delivered anything`,
    {
      data: { reason: 'WatchClosed' },
    },
  );
}
