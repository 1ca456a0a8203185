/**
 * Connections to the API server kept and reused between requests, as client-go does.
 *
 * client-node makes a new `http.Agent` or `https.Agent` for every request (in
 * `applySecurityAuthentication`, for the API clients, and `applyToFetchOptions`, for watches), and
 * an agent never shares its connections with another. So every request of agentd opened a
 * connection of its own: a TCP and a full TLS handshake on both sides, and a new TLS context on
 * agentd's (the CA parsed again), for each status write, Machine read, lease renewal and watch.
 *
 * Here each request's fresh agent is swapped for a shared keep-alive agent made with the same
 * options (the CA, client certificate and key, server name, TLS verification: the credentials of
 * the connection; the token is a header of each request and plays no part). The pool is keyed
 * by those options, never by time: credentials that change (an applied config with another CA, a
 * rotated client certificate) give other options and so another agent; requests already under way
 * on the old one finish there, and its idle connections close after IDLE_SOCKET_MS. Agents of
 * another kind (client-node's proxy agents) are left as they are.
 *
 * The pool is attached through client-node's extension points (`kubeMiddleware` below for the
 * generated API clients; src/kube/watch-stream.ts for watches, whose `Watch` class has none),
 * never by replacing KubeConfig methods.
 *
 * An idle kept connection is closed by agentd after IDLE_SOCKET_MS, before the API server's or a
 * load balancer's own idle timeout would (typically a minute or more), so that a request rarely
 * goes out on a connection the other end is closing. Should one, it fails as a network error:
 * watches and the watcher's reconciles retry it with their backoff; a one-off call (an
 * operator's cordon) answers KUBE_UNAVAILABLE, as for any connection that breaks.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { ServerConfiguration, createConfiguration } from '@kubernetes/client-node';
import type {
  Configuration,
  KubeConfig,
  Middleware,
  RequestContext,
  ResponseContext,
} from '@kubernetes/client-node';
import type { RateLimiter } from './rate-limit.js';

/** How long a kept connection may stay idle before agentd closes it. */
export const IDLE_SOCKET_MS = 30_000;

/**
 * Agents kept at most, the most recently used: one set of credentials is in use at a time, and
 * credentials that rotate (a client certificate from an exec plugin) must not pile up agents.
 * One dropped here still carries the requests under way on it; its idle connections close.
 */
export const MAX_AGENTS = 4;

type AnyAgent = http.Agent | https.Agent;

/** A value of an agent's options as a key part: long strings and buffers (certificates) by hash. */
function keyPart(value: unknown): unknown {
  if (Buffer.isBuffer(value) || (typeof value === 'string' && value.length > 64)) {
    return `sha256:${createHash('sha256').update(value).digest('hex')}`;
  }
  if (Array.isArray(value)) return value.map(keyPart);
  return value;
}

/** The options an agent was made with, as a string: equal strings, equal connections. */
function optionsKey(kind: string, options: Record<string, unknown>): string {
  const entries = Object.keys(options)
    .filter((k) => options[k] !== undefined)
    .sort()
    .map((k) => [k, keyPart(options[k])]);
  return JSON.stringify([kind, entries]);
}

export interface AgentPool {
  /** The shared keep-alive agent for `agent`'s options, or `agent` itself when it is of another kind. */
  share<T extends AnyAgent>(agent: T): T;
  /** Agents kept (one per set of options, at most MAX_AGENTS). */
  readonly size: number;
}

export function createAgentPool(o: { idleSocketMs?: number } = {}): AgentPool {
  const idleSocketMs = o.idleSocketMs ?? IDLE_SOCKET_MS;
  const agents = new Map<string, AnyAgent>();
  return {
    share<T extends AnyAgent>(agent: T): T {
      // Exactly Node's classes: a subclass (a proxy agent) connects in its own way.
      const Kind =
        agent.constructor === https.Agent
          ? https.Agent
          : agent.constructor === http.Agent
            ? http.Agent
            : null;
      if (Kind === null) return agent;
      const options = (agent as unknown as { options: Record<string, unknown> }).options;
      const key = optionsKey(Kind.name, options);
      let shared = agents.get(key);
      if (shared !== undefined) {
        agents.delete(key); // to the end: the most recently used
      } else {
        shared = new Kind({
          ...(options as https.AgentOptions),
          keepAlive: true,
          // An idle kept socket times out and is closed (Node's agent closes free sockets that
          // time out); a socket in use only emits an event no one listens to.
          timeout: (options.timeout as number | undefined) ?? idleSocketMs,
        });
      }
      agents.set(key, shared);
      for (const oldest of agents.keys()) {
        if (agents.size <= MAX_AGENTS) break;
        agents.delete(oldest);
      }
      // The fresh agent has no socket yet (it is dropped before any request used it).
      return shared as T;
    },
    get size() {
      return agents.size;
    },
  };
}

/** What every request of agentd to the API server passes: the client-side rate limit and the pool. */
export interface KubeTransport {
  /** null: unlimited (clients made by tests from a bare KubeConfig). */
  limiter: RateLimiter | null;
  /** null: client-node's own agent per request. */
  pool: AgentPool | null;
  /**
   * Every request is aborted when this aborts (agentctl's deadline for one command, its
   * --timeout); the daemon's requests have none: its watches and retries bound themselves.
   */
  signal?: AbortSignal;
}

/** Neither a limit nor a pool: what a bare KubeConfig gives. */
export const BARE_TRANSPORT: Readonly<KubeTransport> = Object.freeze({ limiter: null, pool: null });

/**
 * The transport as client-node's supported extension point for its generated API clients: a
 * `PromiseMiddleware` of their `Configuration`. The generated request factories apply the
 * KubeConfig's `applySecurityAuthentication` (which sets a fresh agent) before the middleware's
 * `pre` runs (gen/types/ObservableAPI.js), so `pre` waits for the rate limit and swaps that agent
 * for the pool's. One middleware, not two: client-node runs `post` over
 * `_config.middleware.reverse()`, which reverses the configuration's array in place at every
 * request, so the order of several would flip from one request to the next.
 */
export function kubeMiddleware(t: KubeTransport): Middleware {
  return {
    async pre(context: RequestContext): Promise<RequestContext> {
      if (t.signal !== undefined) {
        const own = context.getSignal();
        context.setSignal(own === undefined ? t.signal : AbortSignal.any([own, t.signal]));
      }
      await t.limiter?.acquire(context.getSignal() ?? undefined);
      const agent = context.getAgent();
      if (agent !== undefined && t.pool !== null) context.setAgent(t.pool.share(agent));
      return context;
    },
    post: (context: ResponseContext): Promise<ResponseContext> => Promise.resolve(context),
  };
}

/**
 * A generated API client (CoreV1Api, …) for `kc` whose every request passes `t`: what
 * `kc.makeApiClient` makes (the same server and authentication), with the middleware added.
 */
export function makeApiClient<T>(
  kc: KubeConfig,
  t: KubeTransport,
  ApiClient: new (config: Configuration) => T,
): T {
  const server = kc.getCurrentCluster()?.server;
  if (server === undefined) throw new Error('the kubeconfig has no current cluster');
  return new ApiClient(
    createConfiguration({
      baseServer: new ServerConfiguration(server, {}),
      authMethods: { default: kc },
      promiseMiddleware: [kubeMiddleware(t)],
    }),
  );
}
