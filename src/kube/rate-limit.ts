/**
 * The client-side rate limit every Kubernetes request of agentd passes, like client-go's default
 * (5 requests per second, bursts of 10): one agent can never flood the API server, whatever its
 * retries do. A token bucket on the injected clock; a request over the limit waits its turn.
 *
 * It is attached where client-node lets a caller in, never by replacing KubeConfig methods: the
 * generated API clients take it as a `PromiseMiddleware` of their configuration
 * (`kubeMiddleware` in connection-pool.ts), and every watch request acquires it before it is sent
 * (src/kube/watch-stream.ts), since client-node's `Watch` has no extension point of its own.
 */
import { systemClock } from '../host/clock.js';
import type { Clock } from '../host/types.js';

export interface RateLimitOptions {
  /** Sustained requests per second (default 5). */
  qps?: number;
  /** Requests allowed at once after a quiet spell (default 10). */
  burst?: number;
  clock?: Clock;
}

export interface RateLimiter {
  /** Resolve when the caller may send one request (at once while tokens are left). */
  acquire(signal?: AbortSignal): Promise<void>;
}

/** client-go's `DefaultQPS` and `DefaultBurst`. */
export const DEFAULT_KUBE_QPS = 5;
export const DEFAULT_KUBE_BURST = 10;

export function createRateLimiter(options: RateLimitOptions = {}): RateLimiter {
  const qps = options.qps ?? DEFAULT_KUBE_QPS;
  const burst = options.burst ?? DEFAULT_KUBE_BURST;
  const clock = options.clock ?? systemClock;
  if (!(qps > 0) || !Number.isInteger(burst) || burst < 1) {
    throw new RangeError(
      `rate limit: expected qps > 0 and an integer burst >= 1, received ${qps} and ${burst}`,
    );
  }
  let tokens = burst;
  let last = clock.now();
  return {
    async acquire(signal) {
      const now = clock.now();
      tokens = Math.min(burst, tokens + ((now - last) * qps) / 1000);
      last = now;
      // Reserve a token now, even one that only accrues later, so waiters keep their order.
      tokens -= 1;
      if (tokens >= 0) return;
      try {
        await clock.sleep(Math.ceil((-tokens * 1000) / qps), signal);
      } catch (err) {
        tokens += 1; // the request is not sent: give its reservation back
        throw err;
      }
    },
  };
}
