/**
 * The HTTP side of artifact downloads: one undici dispatcher that follows redirects (GitHub
 * release assets redirect to a CDN), classification of failures into transient (retried) and
 * final ones, and retries with the one backoff policy (src/retry) on the injected clock.
 */
import type { Dispatcher } from 'undici';
import { loadUndici } from '../../lazy-undici.js';
import {
  guardTransfer,
  outboundDispatcher,
  viaProxy,
  type TransferGuard,
  type TransferLimits,
} from '../../outbound-http.js';
import { DownloadFailedError, toAgentError as fromForeign } from '../../errors.js';
import type { AgentError } from '../../errors.js';
import { systemClock } from '../../host/clock.js';
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
  /** Deadline and rate floor of every request (default `DEFAULT_TRANSFER_LIMITS`). */
  limits?: TransferLimits;
  /**
   * The clock the bounds are judged on (default: the system clock). Not `clock`: tests of
   * retries give that one sleeps that return at once, which would pass every deadline.
   */
  boundsClock?: Clock;
}

let defaultDispatcher: Promise<Dispatcher> | undefined;

/** Redirects followed per request (GitHub → CDN takes one or two). */
export const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([300, 301, 302, 303, 307, 308]);

/** The error of a redirect loop, or of a chain longer than `MAX_REDIRECTS`. */
function tooManyRedirects(what: string, url: string, cause?: unknown): DownloadFailedError {
  return new DownloadFailedError(
    `${what}: too many redirects from ${url} (a loop, or more than ${MAX_REDIRECTS})${viaProxy(url)}`,
    { cause, data: { url, maxRedirects: MAX_REDIRECTS } },
  );
}

/** undici's words for a redirect to a URL already visited ("…Use an Agent for cross-origin redirects"). */
function isRedirectLoop(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e.message.startsWith('Redirect loop detected')) return true;
  }
  return false;
}

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
    return dispatcher.compose(redirect({ maxRedirections: MAX_REDIRECTS }));
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
  if (!signal.aborted && isRedirectLoop(err)) return tooManyRedirects(what, url, err);
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

/** The error for a non-2xx answer: 5xx, 408 and 429 are transient; 3xx (redirects left), 403/404 and the rest are final. */
export function statusError(what: string, method: string, url: string, status: number): DownloadFailedError {
  // A redirect still unfollowed at the end: the chain was longer than MAX_REDIRECTS.
  if (REDIRECT_STATUSES.has(status)) return tooManyRedirects(what, url);
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

/** An answered request: status, headers, an undici body stream, and the bounds it runs under. */
export type HttpResponse = Dispatcher.ResponseData & { guard: TransferGuard };

/**
 * One request (no retries) on the context's dispatcher and signal, bounded by the context's
 * limits: `use` reads the answer, and the call ends (its judge stopped) when `use` settles. A hit
 * bound fails it with DOWNLOAD_FAILED naming the URL, the bytes received and the limit.
 */
export async function send<T>(
  ctx: HttpContext,
  method: 'GET' | 'HEAD',
  url: string,
  what: string,
  use: (res: HttpResponse) => Promise<T>,
): Promise<T> {
  const guard = guardTransfer({
    what,
    url,
    clock: ctx.boundsClock ?? systemClock,
    signal: ctx.signal,
    limits: ctx.limits,
    makeError: (message, data) => new DownloadFailedError(message, { data }),
  });
  try {
    const { request } = await loadUndici();
    const res = await request(url, {
      method,
      dispatcher: ctx.dispatcher,
      signal: guard.signal,
      headers: { 'user-agent': 'agentd', accept: '*/*' },
    });
    return await use(Object.assign(res, { guard }));
  } catch (err) {
    throw guard.failure ?? err;
  } finally {
    guard.end();
  }
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
  return withRetries(ctx, what, url, () =>
    send(ctx, 'GET', url, what, async (res) => {
      if (res.statusCode < 200 || res.statusCode >= 300) {
        await res.body.dump();
        throw statusError(what, 'GET', url, res.statusCode);
      }
      res.guard.startBody(maxBytes, contentLength(res));
      const chunks: Buffer[] = [];
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        res.guard.received(chunk.length);
        chunks.push(chunk);
      }
      return Buffer.concat(chunks).toString('utf8');
    }),
  );
}
