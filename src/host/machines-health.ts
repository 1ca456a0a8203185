/**
 * The production kubelet health check: the machines share the host network namespace, so the
 * kubelet of the running machine answers on the host's 127.0.0.1:10248. It runs at every health
 * check of an idle node, so it uses node:http (one GET to loopback, no connection kept) rather
 * than loading undici into a daemon that otherwise never needs it.
 */
import http from 'node:http';
import type { MachineName } from './types.js';

/**
 * Answers whether machine `m`'s kubelet reports healthy. Throws only when agentd itself has no
 * descriptors for the request (EMFILE, ENFILE): that says nothing of kubelet, and must not be
 * taken for an unhealthy one (a repair, or a rollback, of a kubelet that serves).
 */
export type KubeletHealthCheck = (m: MachineName, signal?: AbortSignal) => Promise<boolean>;

export const KUBELET_HEALTHZ_URL = 'http://127.0.0.1:10248/healthz';
const HEALTHZ_TIMEOUT_MS = 2_000;

/** GET the kubelet healthz endpoint: healthy on HTTP 200 within `timeoutMs` (default 2 s). */
export function createHttpKubeletHealthCheck(
  url: string = KUBELET_HEALTHZ_URL,
  timeoutMs: number = HEALTHZ_TIMEOUT_MS,
): KubeletHealthCheck {
  return (_m, signal) =>
    new Promise<boolean>((resolve, reject) => {
      const timeout = AbortSignal.timeout(timeoutMs);
      // Refused, timed out, cancelled or cut off: not healthy now; the caller's poll decides
      // what happens next. `resolve` after the first call does nothing. Out of descriptors:
      // unknown, so it throws.
      const req = http.get(url, {
        agent: false,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      req.once('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'EMFILE' || err.code === 'ENFILE') reject(err);
        else resolve(false);
      });
      req.once('response', (res) => {
        res.once('end', () => resolve(res.statusCode === 200));
        res.once('close', () => resolve(false));
        res.once('error', () => resolve(false));
        res.resume();
      });
    });
}
