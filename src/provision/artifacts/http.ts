/**
 * The HTTP side of artifact downloads: one undici dispatcher that follows redirects (GitHub
 * release assets redirect to a CDN), classification of failures into transient (retried) and
 * final ones, and retries with the one backoff policy (src/retry) on the injected clock.
 */
import type { Dispatcher } from 'undici';
import { loadUndici } from '../../lazy-undici.js';
import { outboundDispatcher, viaProxy } from '../../outbound-http.js';
import { DownloadFailedError, toAgentError as fromForeign } from '../../errors.js';
import type { AgentError } from '../../errors.js';
import type { Clock } from '../../host/types.js';
import { retry } from '../../retry/backoff.js';
import { isRetryableNetworkError, isRetryableStatus } from '../../retry/retryable.js';
import type { ArtifactLogger } from './types.js';

/**
 * Retry schedule: retry n (1-based) waits min(maxDelayMs, baseDelayMs·2ⁿ⁻¹), the upper half of
 * it jittered (see `backoffDelay`).
 */
export interface RetryPolicy {
  retries: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { retries: 4, baseDelayMs: 500, maxDelayMs: 10_000 };

/** What every request of one install run shares. */
export interface HttpContext {
  dispatcher: Dispatcher;
  clock: Clock;
  signal: AbortSignal;
  retry: RetryPolicy;
  logger?: ArtifactLogger;
  /** Called once per retry (for the downloads-retries metric). */
  onRetry?: () => void;
}

let defaultDispatcher: Promise<Dispatcher> | undefined;

/**
 * The process-wide dispatcher: keep-alive pool, redirects followed, generous but finite timeouts,
 * under the process's proxy (src/outbound-http.ts).
 */
export function defaultArtifactDispatcher(): Promise<Dispatcher> {
  defaultDispatcher ??= (async () => {
    const { redirect } = await loadUndici();
    const dispatcher = await outboundDispatcher({
      connect: { timeout: 30_000 },
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    return dispatcher.compose(redirect({ maxRedirections: 5 }));
  })();
  return defaultDispatcher;
}

const transient = new WeakSet<Error>();

/** Mark `err` as worth retrying (5xx, connection reset, truncated body). */
export function markTransient<E extends Error>(err: E): E {
  transient.add(err);
  return err;
}

export function isTransient(err: unknown): boolean {
  return err instanceof Error && transient.has(err);
}

/**
 * Turn anything thrown while doing `what` (e.g. `download kubelet 1.34.0`) against `url` into
 * an `AgentError` (src/errors.ts `toAgentError`): cancellation → CANCELLED, ENOSPC → NO_SPACE,
 * network failures → a transient DOWNLOAD_FAILED; AgentErrors pass through.
 */
export function toAgentError(err: unknown, what: string, url: string, signal: AbortSignal): AgentError {
  return fromForeign(err, what, {
    signal,
    otherwise: (_message, cause, code) => {
      const wrapped = new DownloadFailedError(
        `${what} from ${url}${viaProxy(url)}: ${cause instanceof Error ? cause.message : String(cause)}${code ? ` (${code})` : ''}`,
        { cause, data: { url, ...(code ? { errorCode: code } : {}) } },
      );
      return isRetryableNetworkError(cause) ? markTransient(wrapped) : wrapped;
    },
  });
}

/** The error for a non-2xx answer: 5xx, 408 and 429 are transient; 403/404 and the rest are final. */
export function statusError(what: string, method: string, url: string, status: number): DownloadFailedError {
  const err = new DownloadFailedError(`${what}: ${method} ${url} answered HTTP ${status}${viaProxy(url)}`, {
    data: { url, status },
  });
  return isRetryableStatus(status) ? markTransient(err) : err;
}

/** Run `attempt` until it succeeds, fails with a final error, or the retries are used up. */
export async function withRetries<T>(
  ctx: HttpContext,
  what: string,
  url: string,
  attempt: (n: number) => Promise<T>,
): Promise<T> {
  try {
    return await retry(attempt, {
      what,
      policy: { baseMs: ctx.retry.baseDelayMs, maxMs: ctx.retry.maxDelayMs },
      retries: ctx.retry.retries,
      clock: ctx.clock,
      signal: ctx.signal,
      classify: (err) => toAgentError(err, what, url, ctx.signal),
      isRetryable: isTransient,
      onRetry: (err, n, delayMs) => {
        ctx.logger?.warn({ url, attempt: n, delayMs, err: (err as Error).message }, `${what}: retrying`);
        ctx.onRetry?.();
      },
    });
  } catch (err) {
    throw toAgentError(err, what, url, ctx.signal);
  }
}

/** An answered request: status, headers and an undici body stream the caller must consume or dump. */
export type HttpResponse = Dispatcher.ResponseData;

/** One request (no retries) on the context's dispatcher and signal. */
export async function send(ctx: HttpContext, method: 'GET' | 'HEAD', url: string): Promise<HttpResponse> {
  const { request } = await loadUndici();
  return request(url, {
    method,
    dispatcher: ctx.dispatcher,
    signal: ctx.signal,
    headers: { 'user-agent': 'agentd', accept: '*/*' },
  });
}

/** Content-Length of a response, or undefined when absent or unparsable. */
export function contentLength(res: HttpResponse): number | undefined {
  const raw = res.headers['content-length'];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** GET a small text file (a checksum file), at most `maxBytes`, with retries. */
export async function fetchText(
  ctx: HttpContext,
  what: string,
  url: string,
  maxBytes = 64 * 1024,
): Promise<string> {
  return withRetries(ctx, what, url, async () => {
    const res = await send(ctx, 'GET', url);
    if (res.statusCode < 200 || res.statusCode >= 300) {
      await res.body.dump();
      throw statusError(what, 'GET', url, res.statusCode);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) {
        res.body.destroy();
        throw new DownloadFailedError(
          `${what}: ${url} is larger than ${maxBytes} bytes; not a checksum file`,
          {
            data: { url },
          },
        );
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks).toString('utf8');
  });
}
