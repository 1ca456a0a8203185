import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EventBus, type EngineEvent } from '../../../src/engine/events.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import type { Dispatcher } from '../../../src/rpc/dispatcher.js';
import { createAdminApp, createMetricsApp, RPC_BODY_LIMIT, type Readiness } from '../../../src/server/app.js';
import { listenUnix } from '../../../src/server/socket.js';

const logger = pino({ level: 'silent' });

function fakeDispatcher() {
  const seen: { text: string; caller: string }[] = [];
  const dispatcher: Dispatcher = {
    handle: async () => null,
    async handleText(text, caller) {
      seen.push({ text, caller });
      const body = JSON.parse(text) as { id?: number };
      if (body.id === undefined) return null;
      return { jsonrpc: '2.0', id: body.id, result: 'ok' };
    },
  };
  return { dispatcher, seen };
}

function adminApp(readiness: Readiness = { ready: true, reasons: [] }) {
  const { dispatcher, seen } = fakeDispatcher();
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
  return { app, seen, events };
}

describe('admin app /rpc', () => {
  it('passes the body and the x-agentd-caller header to the dispatcher', async () => {
    const { app, seen } = adminApp();
    const res = await app.inject({
      method: 'POST',
      url: '/rpc',
      headers: { 'content-type': 'application/json', 'x-agentd-caller': 'watcher' },
      payload: '{"jsonrpc":"2.0","id":1,"method":"status"}',
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toEqual({ jsonrpc: '2.0', id: 1, result: 'ok' });
    expect(seen).toEqual([{ text: '{"jsonrpc":"2.0","id":1,"method":"status"}', caller: 'watcher' }]);
    await app.close();
  });

  it('falls back to the user agent as the caller, capped at 64 characters', async () => {
    const { app, seen } = adminApp();
    await app.inject({
      method: 'POST',
      url: '/rpc',
      headers: { 'content-type': 'application/json', 'user-agent': 'u'.repeat(100) },
      payload: '{"id":1}',
    });
    expect(seen[0]?.caller).toBe('u'.repeat(64));
    await app.close();
  });

  it('accepts application/json-rpc and a charset parameter', async () => {
    const { app } = adminApp();
    for (const type of ['application/json-rpc', 'application/json; charset=utf-8']) {
      const res = await app.inject({
        method: 'POST',
        url: '/rpc',
        headers: { 'content-type': type },
        payload: '{"id":2}',
      });
      expect(res.statusCode, type).toBe(200);
    }
    await app.close();
  });

  it('a notification answers 204 with no body', async () => {
    const { app } = adminApp();
    const res = await app.inject({
      method: 'POST',
      url: '/rpc',
      headers: { 'content-type': 'application/json' },
      payload: '{"jsonrpc":"2.0","method":"status"}',
    });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    await app.close();
  });

  it('a body over the limit answers 413 with PAYLOAD_TOO_LARGE', async () => {
    const { app, seen } = adminApp();
    const res = await app.inject({
      method: 'POST',
      url: '/rpc',
      headers: { 'content-type': 'application/json' },
      payload: `"${'x'.repeat(RPC_BODY_LIMIT)}"`,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: { code: 1021, data: { code: 'PAYLOAD_TOO_LARGE', limit: RPC_BODY_LIMIT } },
    });
    expect(seen).toEqual([]);
    await app.close();
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded'])(
    'content type %s answers 415',
    async (type) => {
      const { app } = adminApp();
      const res = await app.inject({
        method: 'POST',
        url: '/rpc',
        headers: { 'content-type': type },
        payload: '{}',
      });
      expect(res.statusCode).toBe(415);
      expect(res.json()).toMatchObject({
        id: null,
        error: { code: -32600, data: { code: 'INVALID_REQUEST' } },
      });
      await app.close();
    },
  );

  it('an unknown route is 404 and GET /rpc is not a route', async () => {
    const { app } = adminApp();
    expect((await app.inject({ method: 'GET', url: '/nope' })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/rpc' })).statusCode).toBe(404);
    await app.close();
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
