/**
 * The watcher's work queue (controller-runtime style): events only add a key; one worker
 * processes keys one at a time; a key added while it is being processed is processed once more
 * afterwards, however many times it was added (so bursts coalesce). A failed key is retried
 * after a capped, jittered backoff; a key may ask to be requeued after a delay. Time is the
 * injected clock's.
 */
import type { Clock } from '../host/types.js';
import { backoffDelay } from '../retry/backoff.js';
import type { BackoffPolicy } from '../retry/backoff.js';

/** What processing a key may ask for: to run again after `requeueAfterMs` (0 = at once). */
export interface ProcessResult {
  requeueAfterMs?: number;
}

export interface WorkQueueOptions {
  clock: Clock;
  backoff: BackoffPolicy;
  /** Process one key. Throwing means "retry with backoff". */
  process: (key: string, signal: AbortSignal) => Promise<ProcessResult | undefined>;
  /** Told about every failure and when the key will be retried. */
  onError?: (key: string, err: unknown, retryInMs: number) => void;
}

export class WorkQueue {
  readonly #o: WorkQueueOptions;
  /** Keys waiting to be processed, in order; a key is in here at most once. */
  readonly #dirty = new Set<string>();
  /**
   * Each delayed key's one pending delay: when it is due, and how to cancel it. A shorter delay
   * supersedes a longer one, whose timer is cancelled, so the key is added once, at the earlier
   * time (client-go's delaying queue keeps one entry per key the same way).
   */
  readonly #delayed = new Map<string, { due: number; cancel: AbortController }>();
  readonly #failures = new Map<string, number>();
  readonly #controller = new AbortController();
  #wake: (() => void) | null = null;
  #worker: Promise<void> | null = null;
  #processing: string | null = null;

  constructor(options: WorkQueueOptions) {
    this.#o = options;
  }

  /** Mark `key` for processing. Cheap and synchronous: safe to call from a watch callback. */
  add(key: string): void {
    if (this.#controller.signal.aborted) return;
    this.#dirty.add(key);
    this.#wake?.();
  }

  /** Add `key` after `ms` of the clock's time; an earlier pending delay of the key wins. */
  addAfter(key: string, ms: number): void {
    if (this.#controller.signal.aborted) return;
    if (ms <= 0) return this.add(key);
    const due = this.#o.clock.now() + ms;
    const pending = this.#delayed.get(key);
    if (pending !== undefined) {
      if (pending.due <= due) return;
      pending.cancel.abort();
    }
    const entry = { due, cancel: new AbortController() };
    this.#delayed.set(key, entry);
    this.#o.clock.sleep(ms, AbortSignal.any([this.#controller.signal, entry.cancel.signal])).then(
      () => {
        if (this.#delayed.get(key) !== entry) return; // superseded meanwhile
        this.#delayed.delete(key);
        this.add(key);
      },
      () => undefined,
    );
  }

  /** Number of keys waiting (not counting delayed ones or the one being processed). */
  get length(): number {
    return this.#dirty.size;
  }

  /** The key being processed now, if any. */
  get processing(): string | null {
    return this.#processing;
  }

  /** Start the one worker. */
  start(): void {
    this.#worker ??= this.#run();
  }

  /**
   * Stop: no new key is taken, pending delays are dropped, and the key being processed gets
   * the abort signal. Resolves when the worker has returned.
   */
  async stop(): Promise<void> {
    this.#controller.abort();
    this.#wake?.();
    await this.#worker;
  }

  async #run(): Promise<void> {
    const signal = this.#controller.signal;
    while (!signal.aborted) {
      const key = this.#dirty.values().next();
      if (key.done) {
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = null;
        continue;
      }
      this.#dirty.delete(key.value);
      this.#processing = key.value;
      try {
        const result = await this.#o.process(key.value, signal);
        this.#failures.delete(key.value);
        if (result?.requeueAfterMs !== undefined && !signal.aborted) {
          this.addAfter(key.value, result.requeueAfterMs);
        }
      } catch (err) {
        if (signal.aborted) break;
        const failures = (this.#failures.get(key.value) ?? 0) + 1;
        this.#failures.set(key.value, failures);
        const delay = backoffDelay(failures, this.#o.backoff);
        this.#o.onError?.(key.value, err, delay);
        this.addAfter(key.value, delay);
      } finally {
        this.#processing = null;
      }
    }
  }
}
