/** Fault injection: failing and delayed requests, and hooks that run before a matching request. */
import { setTimeout as delay } from 'node:timers/promises';
import { serverFault } from './status.js';
import type { HttpError } from './status.js';
import { matchRequest } from './types.js';
import type { RequestInfo, RequestMatcher } from './types.js';

interface FailRule {
  remaining: number;
  status: number;
  match: RequestMatcher | undefined;
  retryAfterSeconds: number | undefined;
}

interface DelayRule {
  ms: number;
  match: RequestMatcher | undefined;
}

interface HookRule {
  remaining: number;
  match: RequestMatcher | undefined;
  hook: (request: RequestInfo) => void | Promise<void>;
}

export class Faults {
  private fails: FailRule[] = [];
  private delays: DelayRule[] = [];
  private hooks: HookRule[] = [];

  /** Answer the next `count` matching requests with `status` (500, 503, 429), with a `Retry-After` if given. */
  failNext(
    count: number,
    options: { status?: number; match?: RequestMatcher; retryAfterSeconds?: number } = {},
  ): void {
    this.fails.push({
      remaining: count,
      status: options.status ?? 503,
      match: options.match,
      retryAfterSeconds: options.retryAfterSeconds,
    });
  }

  /** Delay every matching request by `ms` (real time) until the returned function is called. */
  delay(ms: number, match?: RequestMatcher): () => void {
    const rule: DelayRule = { ms, match };
    this.delays.push(rule);
    return () => {
      this.delays = this.delays.filter((r) => r !== rule);
    };
  }

  /**
   * Run `hook` before the next `times` matching requests are handled (e.g. a second writer that
   * changes the object between agentd's GET and its PATCH).
   */
  beforeNext(match: RequestMatcher | undefined, hook: HookRule['hook'], times = 1): void {
    this.hooks.push({ remaining: times, match, hook });
  }

  /** Apply delays and hooks, then return the injected failure for this request, if any. */
  async apply(request: RequestInfo): Promise<HttpError | undefined> {
    for (const rule of this.delays) if (matchRequest(rule.match, request)) await delay(rule.ms);
    const hooks = this.hooks.filter((h) => h.remaining > 0 && matchRequest(h.match, request));
    for (const h of hooks) {
      h.remaining -= 1;
      await h.hook(request);
    }
    this.hooks = this.hooks.filter((h) => h.remaining > 0);
    const fail = this.fails.find((f) => f.remaining > 0 && matchRequest(f.match, request));
    if (fail === undefined) return undefined;
    fail.remaining -= 1;
    this.fails = this.fails.filter((f) => f.remaining > 0);
    return serverFault(
      fail.status,
      `injected fault: ${request.method} ${request.path} answered ${fail.status}`,
      fail.retryAfterSeconds,
    );
  }
}
