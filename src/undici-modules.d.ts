/**
 * Types of the undici modules src/lazy-undici.ts loads one by one instead of undici's entry.
 * undici publishes types for its entry only; each of these modules exports the value its entry
 * re-exports under the name given here (undici/index.js).
 */
declare module 'undici/lib/dispatcher/agent.js' {
  import type { Agent } from 'undici';
  const agent: typeof Agent;
  export default agent;
}

declare module 'undici/lib/dispatcher/dispatcher.js' {
  import type { Dispatcher } from 'undici';
  const dispatcher: typeof Dispatcher;
  export default dispatcher;
}

declare module 'undici/lib/api/index.js' {
  import type { request, stream, pipeline, upgrade, connect } from 'undici';
  const api: {
    request: typeof request;
    stream: typeof stream;
    pipeline: typeof pipeline;
    upgrade: typeof upgrade;
    connect: typeof connect;
  };
  export default api;
}

declare module 'undici/lib/interceptor/redirect.js' {
  import type { interceptors } from 'undici';
  const redirect: typeof interceptors.redirect;
  export default redirect;
}

declare module 'undici/lib/global.js' {
  import type { getGlobalDispatcher, setGlobalDispatcher } from 'undici';
  const global: {
    getGlobalDispatcher: typeof getGlobalDispatcher;
    setGlobalDispatcher: typeof setGlobalDispatcher;
  };
  export default global;
}

declare module 'undici/lib/dispatcher/proxy-agent.js' {
  import type { ProxyAgent } from 'undici';
  const proxyAgent: typeof ProxyAgent;
  export default proxyAgent;
}
