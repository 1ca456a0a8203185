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
import { DIRECT, proxyFor, redactProxyUrl, type OutboundProxy } from './config/proxy.js';
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
