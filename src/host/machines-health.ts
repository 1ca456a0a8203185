/**
 * The production kubelet health check: the machines share the host network namespace, so the
 * kubelet of the running machine answers on the host's 127.0.0.1:10248.
 */
import { request } from 'undici';
import type { MachineName } from './types.js';

/** Answers whether machine `m`'s kubelet reports healthy; never throws. */
export type KubeletHealthCheck = (m: MachineName, signal?: AbortSignal) => Promise<boolean>;

export const KUBELET_HEALTHZ_URL = 'http://127.0.0.1:10248/healthz';
const HEALTHZ_TIMEOUT_MS = 2_000;

/** GET the kubelet healthz endpoint: healthy on HTTP 200 within `timeoutMs` (default 2 s). */
export function createHttpKubeletHealthCheck(
  url: string = KUBELET_HEALTHZ_URL,
  timeoutMs: number = HEALTHZ_TIMEOUT_MS,
): KubeletHealthCheck {
  return async (_m, signal) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const res = await request(url, {
        method: 'GET',
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      await res.body.text();
      return res.statusCode === 200;
    } catch {
      // Refused, timed out or cancelled: not healthy now; the caller's poll decides what happens next.
      return false;
    }
  };
}
