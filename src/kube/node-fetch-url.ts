/**
 * The `url` module as node-fetch 2 sees it in agentd's bundles (a build plugin in
 * scripts/build.ts gives it this module for its `require('url')`): Node's own, but for `parse`.
 *
 * node-fetch 2, under @kubernetes/client-node, parses every request's URL with the legacy
 * `url.parse()`. Node deprecates it (DEP0169), and from Node 24 on it prints a deprecation
 * warning at the first call, which is the Machine watcher's first request: a journal line that
 * talks of "security implications" at every start of the release executable. node-fetch hands
 * `parse` absolute URLs only, normalized by the WHATWG parser first, so the same fields taken from
 * the WHATWG parser are the same request: this `parse` does that, and never calls `url.parse`.
 */
import { URL, format, urlToHttpOptions } from 'node:url';

export { URL, format };

/** The fields of a legacy `url.parse()` result that node-fetch and `http.request` read. */
export interface LegacyUrl {
  protocol: string | null;
  slashes: boolean | null;
  auth: string | null;
  host: string | null;
  port: string | null;
  hostname: string | null;
  hash: string | null;
  search: string | null;
  query: string | null;
  pathname: string | null;
  path: string | null;
  href: string;
}

/**
 * `url.parse(text)` for what node-fetch passes: an absolute URL gives the fields the legacy parser
 * gives for it (hostname without an IPv6 address's brackets, as `http.request` wants it; auth
 * decoded); anything else a result with no protocol, which node-fetch rejects as "Only absolute
 * URLs are supported", as it does the legacy result for a relative URL.
 */
export function parse(text: string): LegacyUrl {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return {
      protocol: null,
      slashes: null,
      auth: null,
      host: null,
      port: null,
      hostname: null,
      hash: null,
      search: null,
      query: null,
      pathname: null,
      path: null,
      href: text,
    };
  }
  const options = urlToHttpOptions(url);
  return {
    protocol: url.protocol,
    slashes: true,
    auth: options.auth ?? null,
    host: url.host,
    port: url.port === '' ? null : url.port,
    hostname: options.hostname ?? null,
    hash: url.hash === '' ? null : url.hash,
    search: url.search === '' ? null : url.search,
    query: url.search === '' ? null : url.search.slice(1),
    pathname: url.pathname,
    path: options.path ?? null,
    href: url.href,
  };
}
