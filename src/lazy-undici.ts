/**
 * undici, loaded on first use. Only an update (artifact downloads, image pulls) and a fleet
 * health check make HTTP requests with it; a daemon that idles, serves `status` and watches its
 * Machine never needs it, and loading it at start costs resident memory for nothing
 * (docs/benchmarks.md, "Footprint"). Modules that use undici import its types statically and
 * its values through here.
 *
 * Only undici's dispatcher core is loaded: `Agent`, the `request` API and the redirect
 * interceptor, which is all agentd uses. undici's package entry also evaluates its fetch,
 * cookie, cache and WebSocket modules, and the cookie module reads `globalThis.Headers`, which
 * makes Node load its own bundled copy of undici as well: two HTTP clients in one process
 * (docs/benchmarks.md, "Footprint").
 */
import type { Agent, Dispatcher, ProxyAgent, interceptors } from 'undici';

export interface Undici {
  Agent: typeof Agent;
  /** The base class of every dispatcher (agentd's proxy router extends it). */
  Dispatcher: typeof Dispatcher;
  /** undici's `interceptors.redirect`. */
  redirect: typeof interceptors.redirect;
  /**
   * undici's `request(url, options)`: one request on `options.dispatcher`, or on undici's
   * process-wide default agent when none is given.
   */
  request(url: string | URL, options: RequestOptions): Promise<Dispatcher.ResponseData>;
}

export type RequestOptions = Omit<Dispatcher.RequestOptions, 'origin' | 'path'> & { dispatcher?: Dispatcher };

async function load(): Promise<Undici> {
  // undici 7 has no `exports` map: these are its own modules, the ones its entry wires the
  // same way (undici/index.js).
  const [agent, dispatcher, api, redirect, global] = await Promise.all([
    import('undici/lib/dispatcher/agent.js'),
    import('undici/lib/dispatcher/dispatcher.js'),
    import('undici/lib/api/index.js'),
    import('undici/lib/interceptor/redirect.js'),
    import('undici/lib/global.js'),
  ]);
  // What undici's entry does: the request API as methods of every dispatcher.
  Object.assign(dispatcher.default.prototype, api.default);
  return {
    Agent: agent.default,
    Dispatcher: dispatcher.default,
    redirect: redirect.default,
    request(url, { dispatcher: on, ...options }) {
      const u = new URL(url);
      return (on ?? global.default.getGlobalDispatcher()).request({
        ...options,
        origin: u.origin,
        path: `${u.pathname}${u.search}`,
      });
    },
  };
}

let loading: Promise<Undici> | undefined;

export function loadUndici(): Promise<Undici> {
  loading ??= load();
  return loading;
}

/** undici's `ProxyAgent`, loaded only when a proxy is configured (src/outbound-http.ts). */
export async function loadProxyAgent(): Promise<typeof ProxyAgent> {
  await loadUndici();
  return (await import('undici/lib/dispatcher/proxy-agent.js')).default;
}
