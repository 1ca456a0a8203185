/**
 * The HTTP surface of the real daemon over its real unix socket (docs/api.md). One daemon serves
 * every test here: none of them changes its state.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestDaemon, type TestDaemon } from '../support/daemon.js';

let d: TestDaemon;
beforeAll(async () => {
  d = await startTestDaemon();
});
afterAll(async () => {
  await d?.dispose();
});

interface RpcResp {
  jsonrpc: string;
  id: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: Record<string, unknown> };
}

describe('JSON-RPC over POST /rpc', () => {
  it('status answers the daemon, node and operations', async () => {
    const r = (await d.rpc('status')) as unknown as RpcResp;
    expect(r.jsonrpc).toBe('2.0');
    expect(r.error).toBeUndefined();
    expect(r.result?.daemon).toMatchObject({ pid: d.pid, state: 'ready' });
    expect(r.result?.node).toMatchObject({ activeMachine: null, applied: null });
    expect(r.result?.operation).toBeNull();
    expect(r.result?.lastOperation).toBeNull();
  });

  it('config.get on a node that has not joined is NOT_FOUND', async () => {
    const r = (await d.rpc('config.get')) as unknown as RpcResp;
    expect(r.error?.code).toBe(1003);
    expect(r.error?.data?.code).toBe('NOT_FOUND');
  });

  it('rpc.discover returns the OpenRPC document listing status', async () => {
    const r = (await d.rpc('rpc.discover')) as unknown as RpcResp;
    const doc = r.result as { openrpc: string; methods: { name: string }[] };
    expect(doc.openrpc).toMatch(/^1\./);
    expect(doc.methods.map((m) => m.name)).toEqual(
      expect.arrayContaining(['status', 'config.get', 'rpc.discover']),
    );
  });

  it('a notification answers 204 with no body', async () => {
    const res = await d.http('POST', '/rpc', { jsonrpc: '2.0', method: 'status' });
    expect(res.status).toBe(204);
    expect(res.body).toBe('');
  });

  it('a batch mixing valid calls, invalid ones and notifications', async () => {
    const res = await d.http('POST', '/rpc', [
      { jsonrpc: '2.0', id: 1, method: 'status' },
      { jsonrpc: '2.0', method: 'status' },
      { jsonrpc: '2.0', id: 2, method: 'nosuch' },
      { jsonrpc: '2.0', id: 3, method: 'status', params: { bogus: true } },
      'not a request',
      { jsonrpc: '2.0', id: 'four', method: 'status', params: [] },
    ]);
    expect(res.status).toBe(200);
    const body = JSON.parse(res.body) as RpcResp[];
    expect(body).toHaveLength(5);
    const byId = new Map(body.map((r) => [r.id, r]));
    expect(byId.get(1)?.result?.daemon).toBeDefined();
    expect(byId.get(2)?.error).toMatchObject({ code: -32601, data: { code: 'METHOD_NOT_FOUND' } });
    expect(byId.get(3)?.error).toMatchObject({
      code: -32602,
      message: 'status: invalid params: params.bogus: unknown key',
      data: { code: 'INVALID_PARAMS', issues: [{ path: 'bogus', message: 'unknown key' }] },
    });
    expect(byId.get('four')?.error).toMatchObject({
      code: -32602,
      data: { issues: [{ path: '', message: expect.stringContaining('must be an object') }] },
    });
    expect(byId.get(null)?.error?.code).toBe(-32600);
  });

  it('malformed JSON is a parse error', async () => {
    const res = await d.http('POST', '/rpc', '{"jsonrpc":');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ id: null, error: { code: -32700 } });
  });

  // The daemon answers 413 as soon as it knows, and closes the connection: a client still
  // writing would get EPIPE and might never read the answer. So these clients send a bounded
  // amount, never end the request, and wait for the answer.
  it('a body declared over 1 MiB answers 413 with PAYLOAD_TOO_LARGE before it is sent', async () => {
    const res = await postUnfinished({ contentLength: 1024 * 1024 + 1, send: 0 });
    expect(res.status).toBe(413);
    const body = JSON.parse(res.body) as RpcResp;
    expect(body.error?.data?.code).toBe('PAYLOAD_TOO_LARGE');
    expect(body.error?.code).toBe(1021);
  });

  it('a chunked body growing over 1 MiB answers 413 with PAYLOAD_TOO_LARGE', async () => {
    const res = await postUnfinished({ send: 1024 * 1024 + 64 * 1024 });
    expect(res.status).toBe(413);
    expect((JSON.parse(res.body) as RpcResp).error?.data?.code).toBe('PAYLOAD_TOO_LARGE');
    // The daemon still serves.
    expect((await d.http('GET', '/healthz')).status).toBe(200);
  });

  it('GET /rpc answers 405 with Allow: POST', async () => {
    const res = await d.http('GET', '/rpc');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expect(JSON.parse(res.body)).toMatchObject({
      id: null,
      error: { code: -32600, message: '/rpc takes POST, not GET', data: { code: 'INVALID_REQUEST' } },
    });
  });

  it('405, 413 and 415 answers are counted under (invalid) and logged at info with the reason', async () => {
    const count = async (code: string): Promise<number> => {
      const text = (await d.http('GET', '/metrics')).body;
      const re = new RegExp(
        `^agentd_rpc_requests_total\\{method="\\(invalid\\)",code="${code}"\\} (\\d+)$`,
        'm',
      );
      return Number(re.exec(text)?.[1] ?? 0);
    };
    const before = { invalid: await count('INVALID_REQUEST'), large: await count('PAYLOAD_TOO_LARGE') };
    expect((await d.http('PUT', '/rpc', '{}')).status).toBe(405);
    const body = '{"jsonrpc":"2.0","id":1,"method":"status"}';
    expect((await d.http('POST', '/rpc', body, { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await postUnfinished({ contentLength: 1024 * 1024 + 1, send: 0 })).status).toBe(413);
    expect(await count('INVALID_REQUEST')).toBe(before.invalid + 2);
    expect(await count('PAYLOAD_TOO_LARGE')).toBe(before.large + 1);

    // The daemon's log reaches us through a pipe: wait until the three lines have arrived.
    const refusals = () =>
      d
        .logs()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter(
          (l) =>
            l.msg === 'rpc (invalid) answered ' + String(l.code) + ' in ' + String(l.durationMs) + ' ms' &&
            l.rpc === '(invalid)' &&
            typeof l.reason === 'string',
        );
    const INFO = 'info';
    await vi.waitFor(() =>
      expect(refusals()).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            level: INFO,
            code: 'INVALID_REQUEST',
            reason: 'HTTP 405: /rpc takes POST, not PUT',
          }),
          expect.objectContaining({
            level: INFO,
            code: 'INVALID_REQUEST',
            reason: 'HTTP 415: content-type must be application/json, got "text/plain"',
          }),
          expect.objectContaining({
            level: INFO,
            code: 'PAYLOAD_TOO_LARGE',
            reason: `HTTP 413: request body exceeds ${1024 * 1024} bytes (content-length ${1024 * 1024 + 1})`,
          }),
        ]),
      ),
    );
  });

  it('a content type other than JSON answers 415', async () => {
    const res = await d.http('POST', '/rpc', '{"jsonrpc":"2.0","id":1,"method":"status"}', {
      'content-type': 'text/plain',
    });
    expect(res.status).toBe(415);
    expect(JSON.parse(res.body)).toMatchObject({
      error: { code: -32600, data: { code: 'INVALID_REQUEST' } },
    });
  });
});

describe('probes, metrics, documents and events', () => {
  it('/healthz answers 200', async () => {
    const res = await d.http('GET', '/healthz');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ status: 'ok' });
  });

  it('/readyz answers 200 after start', async () => {
    const res = await d.http('GET', '/readyz');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ status: 'ready' });
  });

  it('/metrics has the build info and counts RPC calls by method and code', async () => {
    await d.rpc('status');
    await d.rpc('config.get');
    const res = await d.http('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.body).toMatch(/^agentd_build_info\{version="[^"]+",node_version="v\d+/m);
    expect(res.body).toMatch(/^agentd_rpc_requests_total\{method="status",code="ok"\} [1-9]\d*$/m);
    expect(res.body).toMatch(/^agentd_rpc_requests_total\{method="config\.get",code="NOT_FOUND"\} [1-9]/m);
    expect(res.body).toMatch(/^agentd_ready 1$/m);
    // The default process metrics are there too.
    expect(res.body).toContain('process_cpu_user_seconds_total');
  });

  it('/openapi.json is an OpenAPI 3.1 document of the routes', async () => {
    const res = await d.http('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const doc = JSON.parse(res.body) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/rpc', '/healthz', '/readyz', '/metrics', '/v1/events', '/openapi.json']),
    );
  });

  it('/v1/events answers text/event-stream', async () => {
    const first = await new Promise<{ type: string | undefined; chunk: string }>((resolve, reject) => {
      const req = http.get({ socketPath: d.socket, path: '/v1/events' }, (res) => {
        res.once('data', (c: Buffer) => {
          resolve({ type: res.headers['content-type'], chunk: c.toString('utf8') });
          req.destroy();
        });
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code !== 'ECONNRESET') reject(err);
      });
    });
    expect(first.type).toMatch(/^text\/event-stream/);
    expect(first.chunk).toMatch(/^: /);
    // The daemon is still fine after the client went away.
    expect((await d.http('GET', '/healthz')).status).toBe(200);
  });

  it('/v1/events with an empty operation filter answers 400 naming the parameter', async () => {
    const res = await d.http('GET', '/v1/events?operation=');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({
      id: null,
      error: { code: -32600, data: { code: 'INVALID_REQUEST', parameter: 'operation' } },
    });
    expect((JSON.parse(res.body) as RpcResp).error?.message).toMatch(/^operation: empty/);
  });

  it('an unknown route is 404', async () => {
    expect((await d.http('GET', '/nope')).status).toBe(404);
  });
});

/**
 * POST /rpc sending `send` bytes in 64 KiB chunks (each after the previous one was handed to
 * the kernel) without ending the request, then wait for the answer. With `contentLength` the
 * length is declared; without, the body is chunked.
 */
function postUnfinished(o: {
  contentLength?: number;
  send: number;
}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(
      {
        socketPath: d.socket,
        method: 'POST',
        path: '/rpc',
        headers: {
          'content-type': 'application/json',
          ...(o.contentLength !== undefined ? { 'content-length': String(o.contentLength) } : {}),
        },
      },
      (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
          req.destroy();
        });
      },
    );
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let sent = 0;
    const next = (): void => {
      if (answered || sent >= o.send) return;
      sent += chunk.length;
      req.write(chunk, next);
    };
    req.flushHeaders();
    next();
  });
}
