/**
 * One run of a list+watch (src/kube/list-watch.ts) inside a caller's restart loop: the fleet's
 * policy and slot watches and the watch of this node's cordon each loop over it with their own
 * backoff. No client code is loaded here.
 */

/**
 * Open a watch with `open` (which calls its `onDone` once when the watch ends by itself) and
 * resolve when it ends: with its error, with null when the server closed it or when `signal`
 * aborts. The watch is stopped before this resolves, and one that `open` hands over late is
 * stopped at once. Never rejects: a watch that cannot be opened resolves with that error.
 */
export async function watchOnce(
  open: (onDone: (err: unknown) => void) => Promise<() => void>,
  signal: AbortSignal,
): Promise<unknown> {
  if (signal.aborted) return null;
  let stop: (() => void) | null = null;
  let ended = false;
  let onAbort: (() => void) | null = null;
  try {
    return await new Promise<unknown>((resolve) => {
      onAbort = () => resolve(null);
      signal.addEventListener('abort', onAbort, { once: true });
      open((err) => resolve(err)).then(
        (s) => {
          if (ended) s();
          else stop = s;
        },
        (err: unknown) => resolve(err ?? new Error('watch failed')),
      );
    });
  } finally {
    ended = true;
    if (onAbort !== null) signal.removeEventListener('abort', onAbort);
    (stop as (() => void) | null)?.();
  }
}
