/**
 * How agentd reaches the network over HTTP: artifact downloads, image pulls and fleet health
 * checks take their undici dispatcher from here, so they all honour the proxy the daemon was
 * started with (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`: src/config/proxy.ts, docs/operations.md
 * "Behind an HTTP proxy").
 *
 * With no proxy, a dispatcher is a plain undici `Agent`. With one, it is a router that sends each
 * request, by its URL, directly or through undici's `ProxyAgent`: https URLs through a CONNECT
 * tunnel, http URLs as absolute-URI requests to the proxy (as curl and Go do; proxies commonly
 * allow CONNECT only to port 443). Redirects are routed anew: a redirect to a CDN may go another
 * way than the first request.
 *
 * TLS trusts the host's certificate store (OpenSSL's: /etc/ssl/certs, or `SSL_CERT_FILE` and
 * `SSL_CERT_DIR`) besides Node's bundled Mozilla list, as curl and the node's Go tools do: a
 * mirror or registry signed by a company CA installed with update-ca-certificates, or a proxy
 * that inspects TLS, is trusted here too. The release executable runs with `--use-system-ca`
 * (scripts/build.ts, RELEASE_NODE_OPTIONS), which does it natively; a newer Node.js without it
 * gets the same from `trustSystemCertificates`; on Node.js 20 only `NODE_EXTRA_CA_CERTS` adds CAs.
 */
import tls from 'node:tls';
import type { Agent, Dispatcher } from 'undici';
import { formatByteRate } from './config/byte-rate.js';
import { formatDuration } from './config/duration.js';
import { DIRECT, proxyFor, type OutboundProxy } from './config/proxy.js';
import { redactProxyUrl } from './config/redact.js';
import { DEFAULT_TRANSFER_LIMITS, type TransferLimits } from './config/transfer-limits.js';
import type { Clock } from './host/types.js';

export { DEFAULT_TRANSFER_LIMITS, type TransferLimits };
import { loadProxyAgent, loadUndici } from './lazy-undici.js';

let processProxy: OutboundProxy = DIRECT;
/** What decides a proxy setting (several daemons in one test process read the same environment). */
const proxyKey = (p: OutboundProxy): string =>
  JSON.stringify([p.http?.url.href, p.https?.url.href, p.noProxy]);
let dispatchersMade = false;

/**
 * The proxy of this process's outbound requests. The daemon sets it once at start, before any
 * request; elsewhere (agentctl, tests that call the provisioning code) requests go directly.
 */
export function useOutboundProxy(proxy: OutboundProxy): void {
  if (dispatchersMade && proxyKey(proxy) !== proxyKey(processProxy)) {
    throw new Error('the outbound proxy is set after a dispatcher was made with the previous one');
  }
  processProxy = proxy;
}

/** The proxy `url` would go through, for error messages: ` (through the proxy http://p:3128)` or ''. */
export function viaProxy(url: string | URL, proxy: OutboundProxy | undefined = processProxy): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '';
  }
  const via = proxyFor(proxy, parsed);
  return via ? ` (through the proxy ${redactProxyUrl(via)})` : '';
}

type CertificateApi = {
  getCACertificates?: (type: 'default' | 'system') => string[];
  setDefaultCACertificates?: (certs: string[]) => void;
};

let systemTrusted = false;

/**
 * Add the host's CA certificates to Node's default trust, once, before the first outbound
 * dispatcher, unless the runtime already trusts them (`--use-system-ca`, as the release runs).
 * From JavaScript that costs ~6 MiB of resident memory, which is why the release does not take
 * this path. Returns false where the runtime cannot (no `tls.setDefaultCACertificates`).
 */
export function trustSystemCertificates(
  api: CertificateApi = tls as CertificateApi,
  execArgv: readonly string[] = process.execArgv,
): boolean {
  if (systemTrusted || execArgv.includes('--use-system-ca')) return true;
  const { getCACertificates, setDefaultCACertificates } = api;
  if (!getCACertificates || !setDefaultCACertificates) return false;
  // 'default': the bundled list plus NODE_EXTRA_CA_CERTS; an unreadable store adds nothing.
  setDefaultCACertificates([...new Set([...getCACertificates('default'), ...getCACertificates('system')])]);
  systemTrusted = true;
  return true;
}

/**
 * A dispatcher with `options` (timeouts, keep-alive) for outbound requests under `proxy` (by
 * default the process's), trusting the host's CAs (`trustSystemCertificates`). Each caller keeps
 * the one it makes for the process's life.
 */
export async function outboundDispatcher(
  options: Agent.Options,
  proxy: OutboundProxy = processProxy,
): Promise<Dispatcher> {
  dispatchersMade = true;
  trustSystemCertificates();
  const undici = await loadUndici();
  const direct = new undici.Agent(options);
  if (!proxy.http && !proxy.https) return direct;
  const ProxyAgent = await loadProxyAgent();
  const agents = new Map<string, Dispatcher>();
  /** One ProxyAgent per proxy URL (HTTP_PROXY and HTTPS_PROXY are often the same). */
  const through = (via: URL): Dispatcher => {
    let agent = agents.get(via.href);
    if (!agent) {
      agent = new ProxyAgent({ ...options, uri: via.href, proxyTunnel: false });
      agents.set(via.href, agent);
    }
    return agent;
  };
  const all = (): Dispatcher[] => [direct, ...agents.values()];

  class ProxyRouter extends undici.Dispatcher {
    override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      const via = opts.origin === undefined ? null : proxyFor(proxy, new URL(String(opts.origin)));
      return (via ? through(via) : direct).dispatch(opts, handler);
    }

    override close(): Promise<void>;
    override close(callback: () => void): void;
    override close(callback?: () => void): Promise<void> | void {
      const closed = Promise.all(all().map((d) => d.close())).then(() => undefined);
      if (!callback) return closed;
      void closed.then(callback);
    }

    override destroy(err?: Error | null): Promise<void>;
    override destroy(callback: () => void): void;
    override destroy(err: Error | null, callback: () => void): void;
    override destroy(a?: Error | null | (() => void), b?: () => void): Promise<void> | void {
      const err = typeof a === 'function' ? null : (a ?? null);
      const callback = typeof a === 'function' ? a : b;
      const destroyed = Promise.all(all().map((d) => d.destroy(err))).then(() => undefined);
      if (!callback) return destroyed;
      void destroyed.then(callback);
    }
  }
  return new ProxyRouter();
}

/** What a transfer guard needs: the call's words and URL, its clock and the caller's signal. */
export interface TransferGuardOptions {
  /** `download kubelet 1.34.0`, `registry.example/kube:1.34: GET …`. */
  what: string;
  url: string;
  clock: Clock;
  signal?: AbortSignal | undefined;
  limits?: TransferLimits | undefined;
  /** The error of a hit bound (DOWNLOAD_FAILED for artifacts, IMAGE_PULL_FAILED for images). */
  makeError: (message: string, data: Record<string, unknown>) => Error;
}

/** The bounds of one call in flight: its deadline, its rate floor and its size limit. */
export interface TransferGuard {
  /** The signal to make the request with: aborted (with the failure as reason) when a bound is hit. */
  readonly signal: AbortSignal;
  /** The bound that stopped the call, once one did. */
  readonly failure: Error | undefined;
  /**
   * The body begins: the rate is judged from now, the deadline grows by `declaredBytes` at the
   * floor rate, and more than `limitBytes` (the declared size, or an expected one) fails at once.
   */
  startBody(limitBytes: number, declaredBytes?: number): void;
  /** Count `n` received bytes; throws the failure at once when they pass the limit. */
  received(n: number): void;
  /** The call is over (either way): stop judging it. */
  end(): void;
}

/**
 * Bound one outbound call. The judge runs on the injected clock (tests move time instead of
 * waiting): at the deadline, and at the end of every rate window once the body started.
 */
export function guardTransfer(o: TransferGuardOptions): TransferGuard {
  const limits = o.limits ?? DEFAULT_TRANSFER_LIMITS;
  const { clock } = o;
  const startedAt = clock.now();
  let deadlineAt = startedAt + limits.requestTimeoutMs;
  let windowStart: number | undefined;
  let windowBytes = 0;
  let total = 0;
  let limitBytes = Number.POSITIVE_INFINITY;
  let failure: Error | undefined;
  const tripped = new AbortController();
  const ended = new AbortController();
  /** Wakes the judge early when the body starts (its window ends before the old deadline). */
  let nap = new AbortController();
  const signal = o.signal ? AbortSignal.any([o.signal, tripped.signal]) : tripped.signal;
  const floor = formatByteRate(limits.minRateBytesPerSecond);
  const windowText = formatDuration(limits.rateWindowMs);

  function fail(message: string, data: Record<string, unknown>): Error {
    failure ??= o.makeError(message, { url: o.url, receivedBytes: total, ...data });
    ended.abort();
    tripped.abort(failure);
    return failure;
  }

  function judge(now: number): void {
    if (now >= deadlineAt) {
      fail(
        `${o.what} from ${o.url}: not done after ${formatDuration(now - startedAt)} (received ${total} bytes), past its deadline of ${formatDuration(deadlineAt - startedAt)}`,
        { deadlineMs: deadlineAt - startedAt },
      );
      return;
    }
    if (windowStart === undefined || now < windowStart + limits.rateWindowMs) return;
    const need = (limits.minRateBytesPerSecond * (now - windowStart)) / 1000;
    if (windowBytes < need) {
      fail(
        `${o.what} from ${o.url}: too slow, ${windowBytes} bytes in the last ${formatDuration(now - windowStart)} (received ${total} bytes in all), below the floor of ${floor} averaged over ${windowText}`,
        { minRateBytesPerSecond: limits.minRateBytesPerSecond, rateWindowMs: limits.rateWindowMs },
      );
      return;
    }
    windowStart = now;
    windowBytes = 0;
  }

  async function watch(): Promise<void> {
    while (!ended.signal.aborted) {
      const next = Math.min(
        deadlineAt,
        windowStart === undefined ? Infinity : windowStart + limits.rateWindowMs,
      );
      try {
        // At most a day at a time: a timer longer than 2^31-1 ms would fire at once.
        const ms = Math.min(Math.max(0, next - clock.now()), 86_400_000);
        await clock.sleep(ms, AbortSignal.any([ended.signal, nap.signal]));
      } catch {
        if (nap.signal.aborted) nap = new AbortController();
        continue;
      }
      judge(clock.now());
    }
  }
  void watch();

  return {
    signal,
    get failure() {
      return failure;
    },
    startBody(limit, declared) {
      windowStart = clock.now();
      windowBytes = 0;
      limitBytes = limit;
      const size = declared ?? limit;
      if (Number.isFinite(size)) {
        deadlineAt = Math.max(
          deadlineAt,
          windowStart + limits.requestTimeoutMs + (size * 1000) / limits.minRateBytesPerSecond,
        );
      }
      nap.abort();
    },
    received(n) {
      if (failure) throw failure;
      total += n;
      windowBytes += n;
      if (total > limitBytes) {
        throw fail(
          `${o.what} from ${o.url}: received ${total} bytes, more than its limit of ${limitBytes} bytes`,
          {
            limitBytes,
          },
        );
      }
    },
    end() {
      ended.abort();
    },
  };
}
