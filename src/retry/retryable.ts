/**
 * The one list of failures worth another attempt: network errors (by their Node.js or undici
 * code, anywhere in the `cause` chain) and HTTP answers that say "later" (408, 429, 5xx).
 * Downloads, image pulls, the watcher and Kubernetes calls all judge with it.
 */

/** Error codes of connections that failed or broke: the server may answer on the next try. */
export const RETRYABLE_NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

/** The first string `code` in `err` and its causes (a few levels deep), e.g. `ECONNRESET`. */
export function errorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** True when `err` (or one of its causes) is a connection failure from the list above. */
export function isRetryableNetworkError(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && RETRYABLE_NETWORK_CODES.has(code);
}

/** True for HTTP statuses that ask to come back later: 408, 429 and every 5xx. */
export function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}
