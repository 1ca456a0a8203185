/**
 * The HTTP proxy of agentd's outbound requests (artifact downloads, image pulls, fleet health
 * checks), from the variables every HTTP client on a Linux host reads: `HTTPS_PROXY` for https
 * URLs, `HTTP_PROXY` for http ones, `NO_PROXY` for the hosts reached directly. The rules are Go's
 * `net/http` ones (`httpproxy.FromEnvironment`), which the node's other Go tools (containerd,
 * kubelet, a Go agent) follow too, so one environment means the same to all of them:
 *
 * - the upper-case name wins over the lower-case one (`HTTPS_PROXY` over `https_proxy`);
 * - a proxy without a scheme is `http://` (`proxy.corp:3128`);
 * - `NO_PROXY` is a comma list of host names (`example.com` covers it and its subdomains,
 *   `.example.com` and `*.example.com` only its subdomains), IP addresses and CIDR ranges
 *   (`10.0.0.0/8`, which match only URLs that name an IP address), each but the ranges with an
 *   optional `:port`, or `*` for every host;
 * - localhost and loopback addresses are always reached directly.
 *
 * The Kubernetes API is reached as the kubeconfig says (its `proxy-url`), not through these.
 * docs/operations.md, "Behind an HTTP proxy".
 */
import { BlockList, isIP } from 'node:net';
import { InvalidConfigError } from '../errors.js';
import { redactProxyUrl, redactProxyValue } from './redact.js';

export { redactProxyUrl };

/** The proxy settings read from the environment; `null` proxies mean direct. */
export interface OutboundProxy {
  /** For http:// URLs: the proxy's URL and the variable it came from. */
  http: { url: URL; from: string } | null;
  /** For https:// URLs. */
  https: { url: URL; from: string } | null;
  /** `NO_PROXY` as given (for messages), and its parsed rules. */
  noProxy: string;
  rules: NoProxyRule[];
}

type NoProxyRule =
  | { kind: 'all' }
  | { kind: 'domain'; name: string; subdomainsOnly: boolean; port: number | null }
  | { kind: 'ip'; list: BlockList; port: number | null };

/** No proxy at all: every request goes directly (the default outside the daemon). */
export const DIRECT: OutboundProxy = { http: null, https: null, noProxy: '', rules: [] };

/** The first non-empty of `names` in `env`, with its name. */
function firstOf(env: NodeJS.ProcessEnv, names: readonly string[]): { value: string; from: string } | null {
  for (const name of names) {
    const value = env[name]?.trim();
    if (value) return { value, from: name };
  }
  return null;
}

/** A proxy URL as Go reads it: no scheme means http; only http and https proxies are supported. */
function parseProxyUrl(value: string, from: string): URL {
  // Every message shows the value without its credentials.
  const shown = redactProxyValue(value);
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new InvalidConfigError(`${from}=${shown}: not a proxy URL (expected http://host:port)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidConfigError(
      `${from}=${shown}: ${url.protocol.slice(0, -1)} proxies are not supported (use an http:// or https:// proxy)`,
    );
  }
  if (url.hostname === '') throw new InvalidConfigError(`${from}=${shown}: the proxy URL has no host`);
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    throw new InvalidConfigError(
      `${from}=${shown}: a proxy URL is scheme://[user:password@]host[:port], with no path`,
    );
  }
  return url;
}

/** One `NO_PROXY` entry; throws naming it when it is none of the forms Go accepts. */
function parseRule(entry: string, from: string): NoProxyRule {
  if (entry === '*') return { kind: 'all' };
  const bad = (why: string): InvalidConfigError =>
    new InvalidConfigError(`${from}: entry ${JSON.stringify(entry)}: ${why}`);
  if (entry.includes('/')) {
    const [address = '', bitsText = ''] = entry.split('/');
    const family = isIP(address);
    const bits = Number(bitsText);
    if (family === 0 || !/^\d+$/.test(bitsText) || bits > (family === 4 ? 32 : 128)) {
      throw bad('not a CIDR range (10.0.0.0/8, fd00::/8)');
    }
    const list = new BlockList();
    list.addSubnet(address, bits, family === 4 ? 'ipv4' : 'ipv6');
    return { kind: 'ip', list, port: null };
  }
  // host, host:port, [v6], [v6]:port, or a bare IPv6 address.
  let host = entry;
  let port: number | null = null;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  const withPort = /^([^:]+):(\d+)$/.exec(entry);
  if (bracketed) {
    host = bracketed[1] ?? '';
    port = bracketed[2] === undefined ? null : Number(bracketed[2]);
  } else if (withPort) {
    host = withPort[1] ?? '';
    port = Number(withPort[2]);
  }
  if (port !== null && (port < 1 || port > 65_535)) throw bad('the port is not 1–65535');
  const family = isIP(host);
  if (family !== 0) {
    const list = new BlockList();
    list.addAddress(host, family === 4 ? 'ipv4' : 'ipv6');
    return { kind: 'ip', list, port };
  }
  // A fully qualified name's trailing dot names the same host.
  const name = host
    .replace(/^\*?\./, '')
    .replace(/\.$/, '')
    .toLowerCase();
  if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(name)) throw bad('not a host name, IP address or CIDR range');
  return { kind: 'domain', name, subdomainsOnly: /^\*?\./.test(host), port };
}

/**
 * Read the proxy variables of `env`. Throws INVALID_CONFIG naming the variable for a value that
 * is not a usable proxy URL or `NO_PROXY` list: agentd does not start with a proxy it would
 * only half follow.
 */
export function proxyFromEnv(env: NodeJS.ProcessEnv): OutboundProxy {
  const http = firstOf(env, ['HTTP_PROXY', 'http_proxy']);
  const https = firstOf(env, ['HTTPS_PROXY', 'https_proxy']);
  const noProxy = firstOf(env, ['NO_PROXY', 'no_proxy']);
  const rules = (noProxy?.value ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')
    .map((e) => parseRule(e, noProxy?.from ?? 'NO_PROXY'));
  return {
    http: http ? { url: parseProxyUrl(http.value, http.from), from: http.from } : null,
    https: https ? { url: parseProxyUrl(https.value, https.from), from: https.from } : null,
    noProxy: noProxy?.value ?? '',
    rules,
  };
}

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

/** localhost and loopback addresses: never through a proxy (as Go). */
function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  const family = isIP(host);
  if (family === 4) return host.startsWith('127.');
  if (family === 6) return host === '::1' || host === '0:0:0:0:0:0:0:1';
  return false;
}

/** The proxy `url` goes through under `proxy`, or null for a direct request. */
export function proxyFor(proxy: OutboundProxy, url: URL): URL | null {
  const via = url.protocol === 'https:' ? proxy.https : url.protocol === 'http:' ? proxy.http : null;
  if (!via) return null;
  const host = url.hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
  if (isLoopback(host)) return null;
  const port = url.port === '' ? (DEFAULT_PORTS[url.protocol] ?? 0) : Number(url.port);
  const family = isIP(host);
  for (const rule of proxy.rules) {
    if (rule.kind === 'all') return null;
    if (rule.port !== null && rule.port !== port) continue;
    if (rule.kind === 'ip') {
      if (family !== 0 && rule.list.check(host, family === 4 ? 'ipv4' : 'ipv6')) return null;
    } else if (
      family === 0 &&
      ((!rule.subdomainsOnly && host === rule.name) || host.endsWith(`.${rule.name}`))
    ) {
      return null;
    }
  }
  return via.url;
}

/** One line for the start-up log, or null when every request goes directly. */
export function describeProxy(proxy: OutboundProxy): Record<string, string> | null {
  if (!proxy.http && !proxy.https) return null;
  return {
    ...(proxy.http ? { [proxy.http.from]: redactProxyUrl(proxy.http.url) } : {}),
    ...(proxy.https ? { [proxy.https.from]: redactProxyUrl(proxy.https.url) } : {}),
    ...(proxy.noProxy ? { NO_PROXY: proxy.noProxy } : {}),
  };
}
