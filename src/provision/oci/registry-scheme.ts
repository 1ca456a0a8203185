/**
 * Which scheme a registry is spoken to with: plain HTTP only for loopback and private
 * addresses (a local mirror, a lab registry), HTTPS for everything else. Host names other than
 * `localhost` are never resolved to decide: a public name always means HTTPS.
 */
import net from 'node:net';
import { ImagePullFailedError } from '../../errors.js';

/** Strip a `:port` and IPv6 brackets from a `host[:port]`. */
export function registryHostname(registry: string): string {
  if (registry.startsWith('[')) {
    const end = registry.indexOf(']');
    return end > 0 ? registry.slice(1, end) : registry;
  }
  const colon = registry.lastIndexOf(':');
  return colon >= 0 && registry.indexOf(':') === colon ? registry.slice(0, colon) : registry;
}

function isPrivateIPv4(ip: string): boolean {
  const [a = -1, b = -1] = ip.split('.').map(Number);
  return a === 127 || a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168);
}

/** True for hosts that may be spoken to over plain HTTP (127.0.0.0/8, ::1, localhost, 10/8, 172.16/12, 192.168/16). */
export function isPlainHttpAllowed(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost') return true;
  if (net.isIPv4(host)) return isPrivateIPv4(host);
  if (net.isIPv6(host)) {
    if (host === '::1' || host === '0:0:0:0:0:0:0:1') return true;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host);
    return mapped?.[1] !== undefined && isPrivateIPv4(mapped[1]);
  }
  return false;
}

/** The base URL of a registry's API: `http://<host>` for loopback/private hosts, else `https://<host>`. */
export function registryBaseUrl(registry: string): string {
  return `${isPlainHttpAllowed(registryHostname(registry)) ? 'http' : 'https'}://${registry}`;
}

/**
 * Refuse a URL the registry pointed us to (a token realm, a blob redirect) when it would use
 * plain HTTP to a host that is not loopback/private.
 */
export function validateRegistryUrl(url: URL, what: string): void {
  if (url.protocol === 'https:') return;
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (url.protocol === 'http:' && isPlainHttpAllowed(host)) return;
  throw new ImagePullFailedError(
    `${what}: refusing ${url.protocol}//${url.host}: plain HTTP is allowed only for loopback and private addresses, HTTPS is required otherwise`,
    { data: { url: url.toString() } },
  );
}
