/**
 * The one retry and backoff policy of agentd: capped exponential backoff with jitter on an
 * injected clock. Downloads, image pulls, the watcher (watch restarts and failed reconciles),
 * Machine status writes, drain and repair all wait through it, so a fleet of nodes retrying against one
 * failing server spreads out instead of hammering it in step (see docs/architecture.md, "Retries").
 */
import { CancelledError } from '../errors.js';
import type { Clock } from '../host/types.js';

/** How long to wait before each retry. */
export interface BackoffPolicy {
  /** Delay before the first retry (before jitter). */
  baseMs: number;
  /** Cap of the delay (before jitter). */
  maxMs: number;
  /** Random source in [0, 1) (default `Math.random`); tests pass a fixed one. */
  random?: () => number;
}

/** The watcher's restarts and reconciles: 0.5 s doubling to 30 s, ~2 tries a minute against a broken server. */
export const WATCH_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 500, maxMs: 30_000 });

/** Requests that are part of one operation (downloads, image pulls): 0.5 s doubling to 10 s. */
export const REQUEST_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 500, maxMs: 10_000 });

/** Optimistic-concurrency conflicts (status writes): 0.1 s doubling to 2 s. */
export const CONFLICT_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 100, maxMs: 2_000 });

/** Failed repairs of the node (src/engine/repair.ts): 10 s doubling to 5 min. */
export const REPAIR_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 10_000, maxMs: 300_000 });

/**
 * The wait before retry number `attempt` (1-based): `min(max, base·2^(attempt−1))`, of which
 * the upper half is random ("equal jitter"). Many nodes retrying against one server thus
 * spread out, while no retry comes sooner than half the nominal delay.
 */
export function backoffDelay(attempt: number, policy: BackoffPolicy): number {
  const n = Math.max(1, Math.floor(attempt));
  // 2 ** 40 already exceeds any sane cap: stop the exponent growing without bound.
  const nominal = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(n - 1, 40));
  const r = Math.min(Math.max((policy.random ?? Math.random)(), 0), 1);
  return Math.round(nominal / 2 + (r * nominal) / 2);
}

/**
 * A failure streak: `next()` counts a failure and returns the wait before the next try;
 * `reset()` ends the streak once the thing retried has really worked.
 */
export class Backoff {
  #failures = 0;
  constructor(private readonly policy: BackoffPolicy) {}

  get failures(): number {
    return this.#failures;
  }

  next(): number {
    this.#failures += 1;
    return backoffDelay(this.#failures, this.policy);
  }

  reset(): void {
    this.#failures = 0;
  }
}

export interface RetryOptions {
  /** What is being done, for the CANCELLED error (`download kubelet 1.34.0`). */
  what: string;
  policy: BackoffPolicy;
  /** Further attempts after the first one. */
  retries: number;
  clock: Clock;
  signal?: AbortSignal | undefined;
  /** Whether `err` (already converted by `classify`) is worth another attempt. */
  isRetryable: (err: unknown) => boolean;
  /** Turn what an attempt threw into the error to judge and rethrow (default: as is). */
  classify?: (err: unknown) => unknown;
  /** Called before each wait, e.g. to log and count the retry. */
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
}

/** Run `attempt` until it succeeds, fails with an error not worth retrying, or the retries are spent. */
export async function retry<T>(attempt: (n: number) => Promise<T>, o: RetryOptions): Promise<T> {
  const classify = o.classify ?? ((err: unknown) => err);
  for (let n = 0; ; n++) {
    if (o.signal?.aborted) throw new CancelledError(o.what, { cause: o.signal.reason });
    try {
      return await attempt(n);
    } catch (caught) {
      const err = classify(caught);
      if (n >= o.retries || !o.isRetryable(err)) throw err;
      const delayMs = backoffDelay(n + 1, o.policy);
      o.onRetry?.(err, n + 1, delayMs);
      await sleepOrCancel(o.clock, delayMs, o.signal, o.what);
    }
  }
}

/** Sleep on the injected clock; an abort becomes CANCELLED naming what was being done. */
export async function sleepOrCancel(
  clock: Clock,
  ms: number,
  signal: AbortSignal | undefined,
  what: string,
): Promise<void> {
  try {
    await clock.sleep(ms, signal);
  } catch (err) {
    throw new CancelledError(what, { cause: err });
  }
}

/**
 * Settle with `promise`, or reject with CANCELLED as soon as `signal` aborts: for waits that
 * cannot take the signal themselves (a shared connection being opened, a call already made).
 * The work itself goes on; only this caller stops waiting for it.
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined, what: string): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    // The work was already started: settle its rejection so it is not an unhandled one.
    promise.catch(() => undefined);
    return Promise.reject(new CancelledError(what, { cause: signal.reason }));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new CancelledError(what, { cause: signal.reason }));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
