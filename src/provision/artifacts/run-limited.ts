/** A bounded worker pool that fails fast: the first failure aborts the others and is rethrown once all settle. */
import { CancelledError } from '../../errors.js';

/**
 * Run `fn` over `items` with at most `limit` in flight. `fn` gets a signal that aborts when the
 * outer `signal` aborts or another item fails. Resolves with the results in item order; on
 * failure waits for every started item to finish its cleanup, then rejects with the first
 * error that is not a mere consequence of the abort.
 */
export async function runLimited<T, R>(
  items: readonly T[],
  limit: number,
  signal: AbortSignal | undefined,
  fn: (item: T, index: number, signal: AbortSignal) => Promise<R>,
): Promise<R[]> {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  const results: R[] = new Array<R>(items.length);
  const errors: unknown[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (!controller.signal.aborted && next < items.length) {
      const index = next++;
      // A signal per item: every request and stream of an item listens on it, and one shared
      // signal would collect listeners from all items at once (MaxListenersExceededWarning).
      const item = new AbortController();
      const forward = (): void => item.abort(controller.signal.reason);
      controller.signal.addEventListener('abort', forward, { once: true });
      try {
        results[index] = await fn(items[index] as T, index, item.signal);
      } catch (err) {
        errors.push(err);
        controller.abort(err);
      } finally {
        controller.signal.removeEventListener('abort', forward);
      }
    }
  };
  try {
    const width = Math.max(1, Math.min(limit, items.length));
    await Promise.all(Array.from({ length: width }, worker));
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  if (errors.length > 0) {
    // Items stopped by the first failure report CANCELLED; the first real cause is what matters.
    throw errors.find((e) => !(e instanceof CancelledError)) ?? errors[0];
  }
  if (controller.signal.aborted) throw new CancelledError('artifact installation');
  return results;
}
