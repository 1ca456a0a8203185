/**
 * Retries with capped exponential backoff for registry requests: 5xx, 429, truncated bodies
 * and connection errors are retried; everything else (404, digest mismatch, bad input) is not.
 */
import { AgentError, CancelledError, ImagePullFailedError } from '../../errors.js';
import type { AgentErrorOptions } from '../../errors.js';
import type { Clock } from '../../host/types.js';
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

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  const cause = (err as { cause?: unknown } | null)?.cause;
  const causeCode = (cause as { code?: unknown } | null)?.code;
  return typeof causeCode === 'string' ? causeCode : undefined;
}

/**
 * Turn a foreign error thrown while talking to a registry into an AgentError: CANCELLED when
 * `signal` fired, a transient IMAGE_PULL_FAILED for connection errors, else IMAGE_PULL_FAILED.
 */
export function classifyRequestError(err: unknown, what: string, signal?: AbortSignal): AgentError {
  if (err instanceof AgentError) return err;
  if (signal?.aborted || (err as { name?: unknown } | null)?.name === 'AbortError') {
    return new CancelledError(what, { cause: err });
  }
  const code = errorCode(err);
  const message = `${what}: ${err instanceof Error ? err.message : String(err)}`;
  if (code !== undefined && NETWORK_CODES.has(code))
    return new TransientPullError(message, { cause: err, data: { code } });
  return new ImagePullFailedError(message, { cause: err });
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
  const base = options.baseDelayMs ?? 500;
  const cap = options.maxDelayMs ?? 10_000;
  for (let n = 0; ; n++) {
    if (options.signal?.aborted) throw new CancelledError(what, { cause: options.signal.reason });
    try {
      return await attempt(n);
    } catch (err) {
      const classified = classifyRequestError(err, what, options.signal);
      if (!isTransient(classified) || n >= options.retries) throw classified;
      const delayMs = Math.min(cap, base * 2 ** n);
      options.logger.warn({ err: classified.message, attempt: n + 1, delayMs }, `${what}: retrying`);
      try {
        await options.clock.sleep(delayMs, options.signal);
      } catch (sleepErr) {
        throw new CancelledError(what, { cause: sleepErr });
      }
    }
  }
}
