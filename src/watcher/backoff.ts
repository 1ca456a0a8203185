/** Capped exponential backoff with jitter, for watch restarts and failed reconciles. */

export interface BackoffOptions {
  /** Delay before the first retry (before jitter). */
  baseMs: number;
  /** Cap of the delay (before jitter). */
  maxMs: number;
  /** Random source in [0, 1) (default `Math.random`); tests pass a fixed one. */
  random?: () => number;
}

/** The watcher's defaults: 0.5 s doubling to 30 s, so a broken API server sees ~2 tries a minute. */
export const DEFAULT_BACKOFF: Readonly<BackoffOptions> = Object.freeze({ baseMs: 500, maxMs: 30_000 });

/**
 * The wait before retry number `attempt` (1-based): `min(max, base·2^(attempt−1))`, of which
 * the upper half is random ("equal jitter"). Many nodes restarting against one API server
 * thus spread out, while no retry comes sooner than half the nominal delay.
 */
export function backoffDelay(attempt: number, options: BackoffOptions): number {
  const n = Math.max(1, Math.floor(attempt));
  // 2 ** 40 already exceeds any sane cap: stop the exponent growing without bound.
  const nominal = Math.min(options.maxMs, options.baseMs * 2 ** Math.min(n - 1, 40));
  const r = Math.min(Math.max((options.random ?? Math.random)(), 0), 1);
  return Math.round(nominal / 2 + (r * nominal) / 2);
}
