import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../../src/rpc/dispatcher.js';
import { requestUnix } from '../../support/daemon.js';
import { serveAdmin, type Harness } from './admin-app-harness.js';

describe('/rpc on fastify', () => {
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it("is a fastify route: the app's hooks see it, and inject reaches it", async () => {
    const seen: string[] = [];
    // Added after the app was built, as a plugin of the daemon's would be: every route gets it.
    h = await serveAdmin(
      () => '{"jsonrpc":"2.0","id":1,"result":"ok"}',
      {},
      undefined,
      (app) =>
        app.addHook('onResponse', async (req, reply) => {
          seen.push(`${req.method} ${req.url} ${reply.statusCode}`);
        }),
    );
    expect((await requestUnix(h.socket, 'POST', '/rpc', '{}')).status).toBe(200);
    expect((await requestUnix(h.socket, 'GET', '/rpc')).status).toBe(405);
    const injected = await h.app.inject({
      method: 'POST',
      url: '/rpc',
      headers: { 'content-type': 'application/json' },
      payload: '{}',
    });
    expect(injected.json()).toEqual({ jsonrpc: '2.0', id: 1, result: 'ok' });
    expect(seen).toEqual(['POST /rpc 200', 'GET /rpc 405', 'POST /rpc 200']);
  });

  it.each<[string, Dispatcher['handleText']]>([
    [
      'throws',
      () => {
        throw new Error('boom');
      },
    ],
    ['rejects', () => Promise.reject(new Error('boom'))],
  ])('a dispatcher that %s gives 500 INTERNAL, not a hung request', async (_what, handleText) => {
    h = await serveAdmin(handleText);
    const res = await requestUnix(h.socket, 'POST', '/rpc', '{}');
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body)).toMatchObject({ id: null, error: { data: { code: 'INTERNAL' } } });
  });

  it('answers an asynchronous answer when it arrives, with its length', async () => {
    h = await serveAdmin(async (text) => {
      await new Promise((r) => setImmediate(r));
      return `{"jsonrpc":"2.0","id":null,"result":${JSON.stringify(text)}}`;
    });
    const res = await requestUnix(h.socket, 'POST', '/rpc', '"hi"');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ jsonrpc: '2.0', id: null, result: '"hi"' });
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.body));
  });

  it('a request that arrives while the app closes answers 503 DRAINING, without dispatching', async () => {
    let calls = 0;
    // While closing, before the server is closed: a request on the kept connection.
    let during: { status: number; body: string } | null = null;
    const harness = await serveAdmin(
      () => {
        calls++;
        return '{"jsonrpc":"2.0","id":1,"result":"ok"}';
      },
      {},
      undefined,
      (app) =>
        app.addHook('preClose', async () => {
          during = await post();
        }),
    );
    h = harness;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = () =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(
          {
            agent,
            socketPath: harness.socket,
            method: 'POST',
            path: '/rpc',
            headers: { 'content-type': 'application/json' },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end('{"jsonrpc":"2.0","id":1,"method":"status"}');
      });
    expect((await post()).status).toBe(200);
    await harness.app.close();
    h = null;
    agent.destroy();
    expect(during).toMatchObject({ status: 503 });
    expect(JSON.parse(during!.body)).toMatchObject({
      id: null,
      error: { code: 1002, data: { code: 'DRAINING' } },
    });
    expect(calls).toBe(1);
  });
});
