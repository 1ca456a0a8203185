/**
 * Retries for registry requests, with the one backoff policy (src/retry): 5xx, 429, truncated
 * bodies and connection errors are retried; everything else (404, digest mismatch, bad input)
 * is not.
 */
import { ImagePullFailedError, toAgentError } from '../../errors.js';
import type { AgentError } from '../../errors.js';
import type { AgentErrorOptions } from '../../errors.js';
import type { Clock } from '../../host/types.js';
import { REQUEST_BACKOFF, retry } from '../../retry/backoff.js';
import { isRetryableNetworkError } from '../../retry/retryable.js';
import type { OciLogger } from './types.js';

/** An IMAGE_PULL_FAILED error worth another attempt (server busy, connection lost). */
export class TransientPullError extends ImagePullFailedError {
  constructor(message: string, options: AgentErrorOptions = {}) {
    super(message, options);
    this.name = 'TransientPullError';
  }
}

export interface RetryOptions {
  /** Further attempts after the first one. */
  retries: number;
  clock: Clock;
  signal?: AbortSignal | undefined;
  logger: OciLogger;
  /** First backoff (default 500 ms), doubled per attempt up to `maxDelayMs` (default 10 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
}

/**
 * Turn a foreign error thrown while talking to a registry into an AgentError (src/errors.ts
 * `toAgentError`): CANCELLED when `signal` fired, a transient IMAGE_PULL_FAILED for connection
 * errors, else IMAGE_PULL_FAILED.
 */
export function classifyRequestError(err: unknown, what: string, signal?: AbortSignal): AgentError {
  return toAgentError(err, what, {
    signal,
    otherwise: (message, cause, code) =>
      isRetryableNetworkError(cause)
        ? new TransientPullError(message, { cause, data: { code } })
        : new ImagePullFailedError(message, { cause }),
  });
}

/** Whether another attempt could succeed. */
export function isTransient(err: unknown): boolean {
  return err instanceof TransientPullError;
}

/** Run `attempt` until it succeeds, fails for good, or `retries` further attempts are spent. */
export async function withRetries<T>(
  what: string,
  attempt: (n: number) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  return retry(attempt, {
    what,
    policy: {
      baseMs: options.baseDelayMs ?? REQUEST_BACKOFF.baseMs,
      maxMs: options.maxDelayMs ?? REQUEST_BACKOFF.maxMs,
    },
    retries: options.retries,
    clock: options.clock,
    signal: options.signal,
    classify: (err) => classifyRequestError(err, what, options.signal),
    isRetryable: isTransient,
    onRetry: (err, n, delayMs) => {
      options.logger.warn({ err: (err as Error).message, attempt: n, delayMs }, `${what}: retrying`);
    },
  });
}
