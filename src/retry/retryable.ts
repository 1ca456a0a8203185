/**
 * The one list of failures worth another attempt: network errors (by their Node.js or undici
 * code, anywhere in the `cause` chain) and HTTP answers that say "later" (408, 429, 5xx).
 * Downloads, image pulls, the watcher and Kubernetes calls all judge with it.
 */
import { errorCode } from '../errors.js';

export { errorCode };

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

/** True when `err` (or one of its causes) is a connection failure from the list above. */
export function isRetryableNetworkError(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && RETRYABLE_NETWORK_CODES.has(code);
}

/** True for HTTP statuses that ask to come back later: 408, 429 and every 5xx. */
export function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}
