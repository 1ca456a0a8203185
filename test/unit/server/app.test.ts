import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EventBus, type EngineEvent } from '../../../src/engine/events.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import type { Dispatcher } from '../../../src/rpc/dispatcher.js';
import {
  createAdminApp,
  createMetricsApp,
  RPC_BODY_LIMIT,
  type ProbeRoutesOptions,
  type Readiness,
} from '../../../src/server/app.js';
import { listenUnix } from '../../../src/server/socket.js';
import { requestUnix } from '../../support/daemon.js';

const logger = pino({ level: 'silent' });

function fakeDispatcher() {
  const seen: { text: string; caller: string }[] = [];
  const refused: { code: string; reason: string; caller: string }[] = [];
  const dispatcher: Dispatcher = {
    handle: async () => null,
    async handleText(text, caller) {
      seen.push({ text, caller });
      const body = JSON.parse(text) as { id?: number };
      if (body.id === undefined) return null;
      return JSON.stringify({ jsonrpc: '2.0', id: body.id, result: 'ok' });
    },
    refused(code, reason, caller) {
      refused.push({ code, reason, caller });
    },
  };
  return { dispatcher, seen, refused };
}

function adminApp(readiness: Readiness = { ready: true, reasons: [] }) {
  const { dispatcher, seen, refused } = fakeDispatcher();
  const events = new EventBus();
  const metrics = createMetrics({ version: 'test', collectDefaults: false });
  const app = createAdminApp({
    dispatcher,
    events,
    metrics,
    logger,
    readiness: () => readiness,
    openapi: () => ({ openapi: '3.1.0' }),
    currentOperationEvents: (id) =>
      id === 'op-snap'
        ? [{ type: 'phase', operationId: 'op-snap', phase: 'p', state: 'running', at: 't' }]
        : [],
    sseHeartbeatMs: 60_000,
  });
  return { app, seen, refused, events };
}

/** The admin app with only what its probe routes use given (the /metrics test, both apps alike). */
function createAdminAppForScrape(o: ProbeRoutesOptions) {
  return createAdminApp({
    ...o,
    dispatcher: fakeDispatcher().dispatcher,
    events: new EventBus(),
    openapi: () => ({}),
    currentOperationEvents: () => [],
  });
}

describe('admin app /rpc', () => {
  let dir: string;
  let close: (() => Promise<void>) | null = null;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-rpc-'));
  });
  afterEach(async () => {
    await close?.();
    close = null;
    await rm(dir, { recursive: true, force: true });
  });

  /** The admin app on a unix socket bound as the daemon binds it (listenUnix on the raw server). */
  async function serve() {
    const h = adminApp();
    await h.app.ready();
    const socket = path.join(dir, 'admin.sock');
    await listenUnix(h.app.server, socket, 0o600, null);
    close = () => h.app.close();
    const post = (body: string, headers: Record<string, string> = {}, url = '/rpc') =>
      requestUnix(socket, 'POST', url, body, headers);
    return { ...h, socket, post };
  }

  it('passes the body and the x-agentd-caller header to the dispatcher', async () => {
    const { post, seen } = await serve();
    const res = await post('{"jsonrpc":"2.0","id":1,"method":"status"}', { 'x-agentd-caller': 'watcher' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(res.body)).toEqual({ jsonrpc: '2.0', id: 1, result: 'ok' });
    expect(seen).toEqual([{ text: '{"jsonrpc":"2.0","id":1,"method":"status"}', caller: 'watcher' }]);
  });

  it('falls back to the user agent as the caller, capped at 64 characters', async () => {
    const { post, seen } = await serve();
    await post('{"id":1}', { 'user-agent': 'u'.repeat(100) });
    expect(seen[0]?.caller).toBe('u'.repeat(64));
  });

  it('accepts application/json-rpc, a charset parameter, any case, and a query string', async () => {
    const { post } = await serve();
    for (const type of ['application/json-rpc', 'application/json; charset=utf-8', 'Application/JSON']) {
      expect((await post('{"id":2}', { 'content-type': type })).status, type).toBe(200);
    }
    expect((await post('{"id":3}', {}, '/rpc?trace=1')).status).toBe(200);
  });

  it('a body in several chunks arrives whole, multi-byte characters included', async () => {
    const { socket, seen } = await serve();
    const text = JSON.stringify({ id: 4, params: { word: 'grüß'.repeat(20_000) } });
    const bytes = Buffer.from(text);
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        { socketPath: socket, method: 'POST', path: '/rpc', headers: { 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.on('end', () =>
            res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`)),
          );
        },
      );
      req.on('error', reject);
      // Cut inside a multi-byte character, and send without a content-length (chunked).
      req.write(bytes.subarray(0, 1001));
      setTimeout(() => req.end(bytes.subarray(1001)), 10);
    });
    expect(seen[0]?.text).toBe(text);
  });

  it('a notification answers 204 with no body', async () => {
    const { post } = await serve();
    const res = await post('{"jsonrpc":"2.0","method":"status"}');
    expect(res.status).toBe(204);
    expect(res.body).toBe('');
  });

  it('a body over the limit answers 413 with PAYLOAD_TOO_LARGE, by content-length or while streaming', async () => {
    const { post, socket, seen, refused } = await serve();
    const res = await post(`"${'x'.repeat(RPC_BODY_LIMIT)}"`, { 'x-agentd-caller': 'big' });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: { code: 1021, data: { code: 'PAYLOAD_TOO_LARGE', limit: RPC_BODY_LIMIT } },
    });
    // Counted and logged by the dispatcher, with the reason.
    expect(refused).toEqual([
      {
        code: 'PAYLOAD_TOO_LARGE',
        reason: `HTTP 413: request body exceeds ${RPC_BODY_LIMIT} bytes (content-length ${RPC_BODY_LIMIT + 2})`,
        caller: 'big',
      },
    ]);
    refused.length = 0;
    // A body of exactly the limit is read and handed on.
    const atLimit = await post(`"${'x'.repeat(RPC_BODY_LIMIT - 2)}"`);
    expect(atLimit.status).toBe(204);
    expect(seen.map((s) => s.text.length)).toEqual([RPC_BODY_LIMIT]);
    seen.length = 0;
    // Chunked: no declared length, the count while reading stops it.
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { socketPath: socket, method: 'POST', path: '/rpc', headers: { 'content-type': 'application/json' } },
        (r) => {
          r.resume();
          resolve(r.statusCode ?? 0);
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' ? undefined : reject(err)));
      for (let i = 0; i < 20; i++) req.write(Buffer.alloc(64 * 1024, 0x20));
      req.end();
    });
    expect(status).toBe(413);
    expect(seen).toEqual([]);
    expect(refused).toEqual([
      {
        code: 'PAYLOAD_TOO_LARGE',
        reason: expect.stringMatching(/^HTTP 413: .* bytes read\)$/),
        caller: 'http',
      },
    ]);
  });

  it.each([
    ['text/plain', '"text/plain"'],
    ['application/x-www-form-urlencoded', '"application/x-www-form-urlencoded"'],
    ['application/jsonp', '"application/jsonp"'],
    ['', 'none'],
  ])('content type "%s" answers 415 naming it, counted and logged', async (type, got) => {
    const { post, seen, refused } = await serve();
    const res = await post('{}', { 'content-type': type });
    expect(res.status).toBe(415);
    const message = `content-type must be application/json, got ${got}`;
    expect(JSON.parse(res.body)).toMatchObject({
      id: null,
      error: { code: -32600, data: { code: 'INVALID_REQUEST' }, message },
    });
    expect(seen).toEqual([]);
    expect(refused).toEqual([{ code: 'INVALID_REQUEST', reason: `HTTP 415: ${message}`, caller: 'http' }]);
  });

  it.each(['GET', 'PUT', 'DELETE', 'HEAD', 'OPTIONS'])(
    '%s /rpc answers 405 with Allow: POST, counted and logged; nothing is dispatched',
    async (method) => {
      const { socket, seen, refused } = await serve();
      const res = await requestUnix(socket, method, '/rpc?x=1', method === 'PUT' ? '{}' : undefined);
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe('POST');
      if (method !== 'HEAD') {
        expect(JSON.parse(res.body)).toMatchObject({
          id: null,
          error: {
            code: -32600,
            message: `/rpc takes POST, not ${method}`,
            data: { code: 'INVALID_REQUEST', method },
          },
        });
      }
      expect(seen).toEqual([]);
      expect(refused).toEqual([
        { code: 'INVALID_REQUEST', reason: `HTTP 405: /rpc takes POST, not ${method}`, caller: 'http' },
      ]);
    },
  );

  it('an unknown route is 404 (from fastify), /rpc/x too', async () => {
    const { socket } = await serve();
    expect((await requestUnix(socket, 'GET', '/nope')).status).toBe(404);
    expect((await requestUnix(socket, 'POST', '/rpc/x', '{}')).status).toBe(404);
  });

  it('closing the app cuts a call still open, so the close never waits on it', async () => {
    const hanging = createAdminApp({
      dispatcher: {
        handle: async () => null,
        handleText: () => new Promise<string | null>(() => undefined),
        refused: () => undefined,
      },
      events: new EventBus(),
      metrics: createMetrics({ version: 'test', collectDefaults: false }),
      logger,
      readiness: () => ({ ready: true, reasons: [] }),
      openapi: () => ({}),
      currentOperationEvents: () => [],
    });
    await hanging.ready();
    const socket = path.join(dir, 'hang.sock');
    await listenUnix(hanging.server, socket, 0o600, null);
    const call = requestUnix(socket, 'POST', '/rpc', '{"jsonrpc":"2.0","id":1,"method":"operations.wait"}');
    await new Promise((r) => setTimeout(r, 50));
    await hanging.close();
    await expect(call).rejects.toThrow(/socket hang up|ECONNRESET/);
  });

  it('closing the app closes the server the daemon bound itself', async () => {
    const { app, socket } = await serve();
    await app.close();
    close = null;
    await expect(requestUnix(socket, 'GET', '/healthz')).rejects.toThrow(/ENOENT|ECONNREFUSED/);
  });
});

describe('probes', () => {
  it('/healthz answers 200, /readyz 503 with the reasons until ready', async () => {
    const { app } = adminApp({ ready: false, reasons: ['startup recovery has not finished'] });
    expect((await app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ status: 'not ready', reasons: ['startup recovery has not finished'] });
    await app.close();
  });

  it('/readyz answers 200 when ready, /metrics the Prometheus text', async () => {
    const { app } = adminApp();
    expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready' });
    const metrics = await app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toMatch(/^text\/plain/);
    expect(metrics.body).toContain('agentd_build_info{version="test"');
    await app.close();
  });

  it('the metrics app serves only /metrics, /healthz and /readyz', async () => {
    const metrics = createMetrics({ version: 'test', collectDefaults: false });
    const app = createMetricsApp({ metrics, logger, readiness: () => ({ ready: true, reasons: [] }) });
    for (const url of ['/metrics', '/healthz', '/readyz']) {
      expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(200);
    }
    const rpc = await app.inject({
      method: 'POST',
      url: '/rpc',
      headers: { 'content-type': 'application/json' },
      payload: '{"jsonrpc":"2.0","id":1,"method":"status"}',
    });
    expect(rpc.statusCode).toBe(404);
    for (const url of ['/openapi.json', '/v1/events']) {
      expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(404);
    }
    await app.close();
  });
});

describe('/metrics before a scrape', () => {
  it('brings the node gauges up to date first, on both apps, and renders what that set', async () => {
    for (const make of [createMetricsApp, createAdminAppForScrape]) {
      const metrics = createMetrics({ version: 'test', collectDefaults: false });
      const beforeScrape = vi.fn(async () => {
        metrics.nodeServing.set(1);
      });
      const app = make({ metrics, logger, readiness: () => ({ ready: true, reasons: [] }), beforeScrape });
      const res = await app.inject({ method: 'GET', url: '/metrics' });
      expect(beforeScrape).toHaveBeenCalledTimes(1);
      expect(res.body).toContain('agentd_node_serving 1');
      await app.close();
    }
  });
});

describe('schemas', () => {
  // fastify's own schema compilers are left out of the bundles (scripts/build.ts): a route that
  // needs one must fail loudly, not be served with its schema ignored.
  it('a route given a request schema fails at start, naming the route', async () => {
    const { app } = adminApp();
    app.post('/with-body-schema', { schema: { body: { type: 'object' } } }, async () => ({}));
    await expect(app.ready()).rejects.toThrow(
      "POST /with-body-schema: agentd's HTTP routes carry no JSON schema; check input in the handler",
    );
    await app.close();
  });

  it('a route given a response schema fails at start, naming the route', async () => {
    const { app } = adminApp();
    app.get('/with-reply-schema', { schema: { response: { 200: { type: 'object' } } } }, async () => ({}));
    await expect(app.ready()).rejects.toThrow(
      "GET /with-reply-schema: agentd's HTTP routes carry no response schema; answer plain JSON",
    );
    await app.close();
  });

  it('the metrics app is built the same way', async () => {
    const metrics = createMetrics({ version: 'test', collectDefaults: false });
    const app = createMetricsApp({ metrics, logger, readiness: () => ({ ready: true, reasons: [] }) });
    app.post('/x', { schema: { querystring: { type: 'object' } } }, async () => ({}));
    await expect(app.ready()).rejects.toThrow("POST /x: agentd's HTTP routes carry no JSON schema");
    await app.close();
  });
});

describe('/v1/events', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-sse-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Open the stream and collect text until `until` matches; then close the connection. */
  function follow(socketPath: string, url: string, until: (text: string) => boolean, onOpen?: () => void) {
    return new Promise<{ headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
      const req = http.get({ socketPath, path: url }, (res) => {
        let text = '';
        onOpen?.();
        res.on('data', (c: Buffer) => {
          text += c.toString('utf8');
          if (until(text)) {
            req.destroy();
            resolve({ headers: res.headers, text });
          }
        });
      });
      req.on('error', (err) => {
        if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(err);
      });
    });
  }

  const phase = (operationId: string): EngineEvent => ({
    type: 'phase',
    operationId,
    phase: 'provision',
    state: 'running',
    at: '2026-01-01T00:00:00Z',
  });

  it('streams events as SSE frames, filtered by ?operation=, and unsubscribes on close', async () => {
    const { app, events } = adminApp();
    const socketPath = path.join(dir, 'a.sock');
    await app.listen({ path: socketPath });
    const opened = follow(
      socketPath,
      '/v1/events?operation=op-b',
      (t) => t.includes('op-b'),
      () => {
        // The subscription happens before the first write; publish once the stream is open.
        setImmediate(() => {
          events.publish(phase('op-a'));
          events.publish(phase('op-b'));
        });
      },
    );
    const { headers, text } = await opened;
    expect(headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(text.startsWith(': agentd event stream\n\n')).toBe(true);
    expect(text).not.toContain('op-a');
    expect(text).toContain(`id: 2\nevent: phase\ndata: ${JSON.stringify(phase('op-b'))}\n\n`);
    // The server learns of the closed connection asynchronously.
    await vi.waitFor(() => expect(events.listenerCount).toBe(0));
    await app.close();
  });

  it.each([
    ['?operation=', 'operation', /^operation: empty; give an operation id, or leave operation out/],
    ['?operation', 'operation', /^operation: empty/],
    ['?operation=op-a&operation=op-b', 'operation', /^operation: give one operation id, not several$/],
    ['?operaton=op-a', 'operaton', /^\/v1\/events takes no query parameter "operaton"; only operation=ID$/],
  ])('%s answers 400 naming the parameter, and streams nothing', async (query, parameter, message) => {
    const { app, events } = adminApp();
    const socketPath = path.join(dir, 'q.sock');
    await app.listen({ path: socketPath });
    const res = await requestUnix(socketPath, 'GET', `/v1/events${query}`);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = JSON.parse(res.body) as {
      id: null;
      error: { code: number; message: string; data: unknown };
    };
    expect(body.error).toMatchObject({ code: -32600, data: { code: 'INVALID_REQUEST', parameter } });
    expect(body.error.message).toMatch(message);
    expect(events.listenerCount).toBe(0);
    await app.close();
  });

  it('sends the snapshot of the followed operation first', async () => {
    const { app } = adminApp();
    const socketPath = path.join(dir, 'b.sock');
    await app.listen({ path: socketPath });
    const { text } = await follow(socketPath, '/v1/events?operation=op-snap', (t) => t.includes('op-snap'));
    expect(text).toContain('id: 0\nevent: phase\ndata: {"type":"phase","operationId":"op-snap"');
    await app.close();
  });

  it('closing the app ends open streams, also when the daemon bound the socket itself', async () => {
    const { app } = adminApp();
    await app.ready();
    const socketPath = path.join(dir, 'c.sock');
    // As the daemon does: listenUnix on the raw server (fastify's own force-close does not apply).
    await listenUnix(app.server, socketPath, 0o600, null);
    let closed: Promise<void> | null = null;
    const ended = new Promise<string>((resolve) => {
      http.get({ socketPath, path: '/v1/events' }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c.toString('utf8');
          closed ??= app.close();
        });
        res.on('end', () => resolve(text));
      });
    });
    expect(await ended).toBe(': agentd event stream\n\n');
    await closed;
  });
});
