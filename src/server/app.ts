/**
 * The HTTP surface (docs/api.md), all of it on fastify. The admin socket gets every route
 * (`/rpc`: rpc-route.ts; `/v1/events`: event-stream.ts; the probes, `/metrics`,
 * `/openapi.json`); the optional TCP metrics listener gets only /metrics, /healthz and /readyz
 * (never /rpc). Both run on a node:http server with the bounds of connection-guard.ts.
 */
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Logger } from 'pino';
import type { EngineEvent, EventBus } from '../engine/events.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Dispatcher } from '../rpc/dispatcher.js';
import { makeWireError } from '../rpc/error-map.js';
import {
  connectionLimitsFor,
  createGuardedServer,
  METRICS_LISTENER_LIMITS,
  readDescriptorLimit,
  type ConnectionGuard,
  type ConnectionLimits,
} from './connection-guard.js';
import { registerEventStream } from './event-stream.js';
import { RPC_BODY_LIMIT, registerRpcRoute, sendWireError } from './rpc-route.js';

export { RPC_BODY_LIMIT };

export interface Readiness {
  ready: boolean;
  reasons: string[];
}

export interface ProbeRoutesOptions {
  metrics: Metrics;
  readiness: () => Readiness;
  logger: Logger;
  /** Brings what /metrics shows of the node up to date before a scrape is rendered (the engine's `freshen`). */
  beforeScrape?: () => Promise<unknown>;
  /** The listener's bounds (connection-guard.ts); by default derived from the descriptor limit. */
  connectionLimits?: ConnectionLimits;
}

export interface AppOptions extends ProbeRoutesOptions {
  dispatcher: Dispatcher;
  events: EventBus;
  openapi: () => Record<string, unknown>;
  /** Snapshot sent first on every event stream, so a follower starts from the current state. */
  currentOperationEvents: (operationId: string | null) => EngineEvent[];
  sseHeartbeatMs?: number;
  /** What an event-stream client may leave unread before it is disconnected (event-stream.ts). */
  sseBufferBytes?: number;
}

type CompilersFactory = NonNullable<
  NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']
>;

/** What fastify hands a schema compiler for each route that has a schema (its lib/route.js). */
interface RouteSchema {
  method: string;
  url: string;
}

/**
 * fastify's schema compilers, in place of its defaults (ajv and fast-json-stringify). agentd's
 * routes carry no JSON schemas: /rpc checks its params with zod (src/rpc/schemas.ts) and the
 * other routes take no input. fastify loads its default compilers only when none are given, so
 * these keep ~270 KB of code out of the daemon's bundle and its memory (scripts/build.ts leaves
 * those packages out; docs/benchmarks.md, "Footprint"). A route given a schema fails when the
 * app starts, naming the route, rather than being served with its schema ignored.
 */
export const NO_SCHEMA_COMPILERS: Required<CompilersFactory> = {
  // @fastify/ajv-compiler's published types describe ajv's own compile function here, not the
  // route definition fastify passes at run time: hence the cast.
  buildValidator: (() =>
    ({ method, url }: RouteSchema): never => {
      throw new Error(
        `${method} ${url}: agentd's HTTP routes carry no JSON schema; check input in the handler (src/server/app.ts)`,
      );
    }) as unknown as CompilersFactory['buildValidator'] & object,
  buildSerializer:
    () =>
    ({ method, url }: RouteSchema): never => {
      throw new Error(
        `${method} ${url}: agentd's HTTP routes carry no response schema; answer plain JSON (src/server/app.ts)`,
      );
    },
};

/** Which listener an app serves: the `listener` label of the connection metrics. */
type Listener = 'socket' | 'metrics';

/**
 * The fastify app on a guarded node:http server. fastify closes (and force-closes the
 * connections of) a server from a factory only when it did the listening itself; the daemon
 * binds the socket on its own (for the socket's mode), so the onClose hook does both.
 */
function baseApp(
  o: ProbeRoutesOptions,
  listener: Listener,
  limits: ConnectionLimits,
): { app: FastifyInstance; guard: () => ConnectionGuard } {
  const { logger, metrics } = o;
  let guard: ConnectionGuard | undefined;
  let closing = false;
  const app = Fastify({
    logger: false,
    bodyLimit: RPC_BODY_LIMIT,
    // Answered by the onRequest hook below, as a JSON-RPC error like every other refusal.
    return503OnClosing: false,
    forceCloseConnections: true,
    schemaController: { compilersFactory: NO_SCHEMA_COMPILERS },
    serverFactory: (handler) => {
      const guarded = createGuardedServer(limits, handler, {
        onSize: (n) => metrics.httpConnections.set({ listener }, n),
        onClose: (reason) => metrics.httpConnectionsClosed.inc({ listener, reason }),
      });
      guard = guarded.guard;
      return guarded.server;
    },
  });
  metrics.httpConnections.set({ listener }, 0);
  // No route but /rpc takes a body (its scope has its own parser: rpc-route.ts).
  app.removeAllContentTypeParsers();
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onClose', (instance, done) => {
    if (!instance.server.listening) return done();
    instance.server.close(() => done());
    instance.server.closeAllConnections();
  });
  // A callback hook, not an async one: it runs on every request, and an answer from it ends the
  // request without `done` (fastify's hooks reference, "Respond to a request from a hook").
  app.addHook('onRequest', (req, reply, done) => {
    if (closing) {
      sendWireError(
        reply,
        503,
        makeWireError('DRAINING', 'agentd is shutting down and accepts no new requests'),
      );
    } else if (guard?.isReserved(req.raw.socket) === true && !reserveRoute(req)) {
      refuseReserved(reply, limits, guard);
    } else {
      done();
    }
  });
  app.setErrorHandler((err: FastifyError, _req, reply) => {
    if (err.statusCode !== undefined && err.statusCode < 500) {
      const e = makeWireError('INVALID_REQUEST', err.message);
      return reply.code(err.statusCode).send({ jsonrpc: '2.0', id: null, error: e });
    }
    logger.error({ err }, 'unhandled HTTP error');
    return reply
      .code(500)
      .send({ jsonrpc: '2.0', id: null, error: makeWireError('INTERNAL', 'internal error') });
  });
  // HTTP-level lines are debug detail (each RPC call already logs one line at info); the hook
  // is only installed when debug is on, so it costs nothing on the hot path otherwise.
  if (logger.isLevelEnabled('debug')) {
    app.addHook('onResponse', (req, reply, done) => {
      logger.debug(
        {
          http: req.method,
          url: req.url,
          status: reply.statusCode,
          durationMs: Math.round(reply.elapsedTime * 100) / 100,
        },
        `http ${req.method} ${req.url} answered ${reply.statusCode} in ${Math.round(reply.elapsedTime * 100) / 100} ms`,
      );
      done();
    });
  }
  const guardOf = (): ConnectionGuard => {
    if (guard === undefined) throw new Error('the HTTP server is not built yet');
    return guard;
  };
  return { app, guard: guardOf };
}

/** The routes a connection from the reserve may use: the probes, and /rpc (for `status` only). */
function reserveRoute(req: FastifyRequest): boolean {
  const path = req.url.split('?')[0];
  if (req.method === 'GET') return path === '/readyz' || path === '/healthz';
  return req.method === 'POST' && path === '/rpc';
}

/** Answer 503 on a reserve connection, which is then closed (counted `reserve_only`). */
function refuseReserved(reply: FastifyReply, limits: ConnectionLimits, guard: ConnectionGuard): FastifyReply {
  guard.closed('reserve_only');
  return sendWireError(
    reply,
    503,
    makeWireError(
      'UNAVAILABLE',
      `agentd holds its limit of ${limits.maxConnections} connections, all busy; this connection may ask only for status, /readyz or /healthz (docs/operations.md, "Limits")`,
    ),
  );
}

function registerProbeRoutes(app: FastifyInstance, o: ProbeRoutesOptions): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    const r = o.readiness();
    return reply
      .code(r.ready ? 200 : 503)
      .send(r.ready ? { status: 'ready' } : { status: 'not ready', reasons: r.reasons });
  });
  app.get('/metrics', async (_req, reply) => {
    await o.beforeScrape?.();
    const body = await o.metrics.registry.metrics();
    return reply.type(o.metrics.registry.contentType).send(body);
  });
}

/** The admin app: every route, on the unix socket. */
export function createAdminApp(o: AppOptions): FastifyInstance {
  const limits = o.connectionLimits ?? connectionLimitsFor(readDescriptorLimit());
  const { app, guard } = baseApp(o, 'socket', limits);
  // Event streams never end by themselves: end them on close, or one `agentctl` following an
  // operation would keep the daemon from ever exiting.
  const streams = new Set<() => void>();
  app.addHook('preClose', (done) => {
    for (const end of [...streams]) end();
    streams.clear();
    done();
  });
  registerRpcRoute(app, {
    dispatcher: o.dispatcher,
    logger: o.logger,
    statusOnly: (req) => guard().isReserved(req.raw.socket),
    refuseReserved: (reply) => refuseReserved(reply, limits, guard()),
  });
  registerProbeRoutes(app, o);
  app.get('/openapi.json', async () => o.openapi());
  registerEventStream(app, {
    events: o.events,
    currentOperationEvents: o.currentOperationEvents,
    logger: o.logger,
    streams,
    guard: guard(),
    ...(o.sseHeartbeatMs !== undefined ? { heartbeatMs: o.sseHeartbeatMs } : {}),
    ...(o.sseBufferBytes !== undefined ? { bufferBytes: o.sseBufferBytes } : {}),
  });
  return app;
}

/** The TCP metrics listener: probes and metrics only. */
export function createMetricsApp(o: ProbeRoutesOptions): FastifyInstance {
  const { app } = baseApp(o, 'metrics', o.connectionLimits ?? METRICS_LISTENER_LIMITS);
  registerProbeRoutes(app, o);
  return app;
}
