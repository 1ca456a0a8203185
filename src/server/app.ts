/**
 * The HTTP surface (docs/api.md). The admin socket gets every route: `/rpc` (any method) from the
 * bare handler of rpc-endpoint.ts, everything else from fastify. The optional TCP metrics listener
 * gets only /metrics, /healthz and /readyz (never /rpc).
 */
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyServerFactory,
  type FastifyServerOptions,
} from 'fastify';
import http, { type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { EngineEvent, EventBus } from '../engine/events.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Dispatcher } from '../rpc/dispatcher.js';
import { makeWireError } from '../rpc/error-map.js';
import { createRpcEndpoint, isRpcRoute, RPC_BODY_LIMIT } from './rpc-endpoint.js';

export { RPC_BODY_LIMIT };

/** fastify's default keep-alive timeout, kept for the server the admin app builds itself. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

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
}

export interface AppOptions extends ProbeRoutesOptions {
  dispatcher: Dispatcher;
  events: EventBus;
  openapi: () => Record<string, unknown>;
  /** Snapshot sent first on every event stream, so a follower starts from the current state. */
  currentOperationEvents: (operationId: string | null) => EngineEvent[];
  sseHeartbeatMs?: number;
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

function baseApp(logger: Logger, serverFactory?: FastifyServerFactory): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: RPC_BODY_LIMIT,
    return503OnClosing: true,
    forceCloseConnections: true,
    schemaController: { compilersFactory: NO_SCHEMA_COMPILERS },
    ...(serverFactory ? { serverFactory } : {}),
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
  return app;
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

function sseFrame(seq: number, event: EngineEvent): string {
  return `id: ${seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/**
 * The query of `/v1/events`: `operation=ID`, or nothing. A filter that would silently match
 * nothing or everything — `?operation=` empty, given twice, or a parameter the stream does not
 * take (a typo) — is refused naming the parameter (docs/api.md).
 */
function eventsQuery(
  query: Record<string, unknown>,
): { operation: string | null } | { error: string; parameter: string } {
  for (const name of Object.keys(query)) {
    if (name !== 'operation') {
      const shown = name.slice(0, 64);
      return {
        error: `/v1/events takes no query parameter ${JSON.stringify(shown)}; only operation=ID`,
        parameter: shown,
      };
    }
  }
  const operation = query.operation;
  if (operation === undefined) return { operation: null };
  if (typeof operation !== 'string') {
    return { error: 'operation: give one operation id, not several', parameter: 'operation' };
  }
  if (operation === '') {
    return {
      error: 'operation: empty; give an operation id, or leave operation out to follow every operation',
      parameter: 'operation',
    };
  }
  return { operation };
}

function eventOperationId(event: EngineEvent): string {
  return event.type === 'operation' ? event.operation.id : event.operationId;
}

/**
 * The admin app. Its node:http server sends every request for `/rpc` (POST, or 405 for another
 * method) to the bare endpoint and every other request to fastify (so `inject`, which bypasses
 * the server, never reaches /rpc).
 */
export function createAdminApp(o: AppOptions): FastifyInstance {
  let closing = false;
  const rpc = createRpcEndpoint({ dispatcher: o.dispatcher, logger: o.logger, isClosing: () => closing });
  const app = baseApp(o.logger, (fastifyHandler) => {
    const server = http.createServer((req, res) =>
      isRpcRoute(req) ? rpc(req, res) : fastifyHandler(req, res),
    );
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    return server;
  });
  // No POST route is left on fastify: no body is ever parsed by it.
  app.removeAllContentTypeParsers();
  app.setErrorHandler((err: FastifyError, _req, reply) => {
    if (err.statusCode !== undefined && err.statusCode < 500) {
      const e = makeWireError('INVALID_REQUEST', err.message);
      return reply.code(err.statusCode).send({ jsonrpc: '2.0', id: null, error: e });
    }
    o.logger.error({ err }, 'unhandled HTTP error');
    return reply
      .code(500)
      .send({ jsonrpc: '2.0', id: null, error: makeWireError('INTERNAL', 'internal error') });
  });

  registerProbeRoutes(app, o);
  app.get('/openapi.json', async () => o.openapi());

  // Event streams never end by themselves, and fastify force-closes connections only when it
  // did the listening (the daemon binds the socket itself, for its mode): end them on close, or
  // one `agentctl` following an operation would keep the daemon from ever exiting.
  const streams = new Set<ServerResponse>();
  app.addHook('preClose', (done) => {
    closing = true;
    for (const res of streams) res.end();
    streams.clear();
    done();
  });
  // fastify closes (and force-closes the connections of) a server from a factory only when it
  // did the listening itself; the daemon binds the socket on its own (for the socket's mode), so
  // do both here too: requests still open at close, as `forceCloseConnections` says, are cut.
  app.addHook('onClose', (instance, done) => {
    if (!instance.server.listening) return done();
    instance.server.close(() => done());
    instance.server.closeAllConnections();
  });

  app.get('/v1/events', (req, reply) => {
    const query = eventsQuery(req.query as Record<string, unknown>);
    if ('error' in query) {
      const error = makeWireError('INVALID_REQUEST', query.error, { parameter: query.parameter });
      return reply.code(400).send({ jsonrpc: '2.0', id: null, error });
    }
    const filter = query.operation;
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    res.write(': agentd event stream\n\n');
    for (const event of o.currentOperationEvents(filter)) res.write(sseFrame(0, event));
    const unsubscribe = o.events.subscribe((seq, event) => {
      if (filter === null || eventOperationId(event) === filter) res.write(sseFrame(seq, event));
    });
    const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), o.sseHeartbeatMs ?? 15_000);
    streams.add(res);
    const close = (): void => {
      clearInterval(heartbeat);
      unsubscribe();
      streams.delete(res);
    };
    req.raw.once('close', close);
    res.once('close', close);
  });
  return app;
}

/** The TCP metrics listener: probes and metrics only. */
export function createMetricsApp(o: ProbeRoutesOptions): FastifyInstance {
  const app = baseApp(o.logger);
  registerProbeRoutes(app, o);
  return app;
}
