import http from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  connectionLimitsFor,
  DEFAULT_TIMEOUTS,
  readDescriptorLimit,
  type ConnectionLimits,
} from '../../../src/server/connection-guard.js';
import { requestUnix } from '../../support/daemon.js';
import { rawConnection, serveAdmin, type Harness } from './admin-app-harness.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            20000                524288               files
Max locked memory         8388608              8388608              bytes
`;

describe('the connection limit, from the descriptor limit', () => {
  it('reads the soft limit of open files from /proc/self/limits', () => {
    expect(readDescriptorLimit(LIMITS)).toBe(20_000);
    expect(readDescriptorLimit(LIMITS.replace('20000  ', 'unlimited'))).toBe(Number.MAX_SAFE_INTEGER);
    expect(readDescriptorLimit('garbage')).toBeNull();
    // This process's, on Linux: a number.
    expect(readDescriptorLimit()).toBeGreaterThan(0);
  });

  it('is a quarter of the descriptors, between 16 and 1024, with a reserve of 8', () => {
    expect(connectionLimitsFor(1024)).toMatchObject({ maxConnections: 256, reserve: 8 });
    expect(connectionLimitsFor(20_000).maxConnections).toBe(1024);
    expect(connectionLimitsFor(40).maxConnections).toBe(16);
    expect(connectionLimitsFor(null).maxConnections).toBe(256);
  });
});

describe('the connection guard on the admin socket', () => {
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  const small = (o: Partial<ConnectionLimits> = {}): ConnectionLimits => ({
    maxConnections: 4,
    reserve: 1,
    ...DEFAULT_TIMEOUTS,
    ...o,
  });
  const STATUS = '{"jsonrpc":"2.0","id":1,"method":"status"}';
  const WAIT = '{"jsonrpc":"2.0","id":1,"method":"operations.wait"}';

  /** Calls of operations.wait under way. */
  let waiting = 0;
  /** Answers at once, but operations.wait never (a long poll that holds its connection). */
  const handleText = (text: string) => {
    if (!text.includes('operations.wait')) return '{"jsonrpc":"2.0","id":1,"result":"ok"}';
    waiting++;
    return new Promise<string>(() => undefined);
  };
  const openConnections = async (harness: Harness): Promise<number> =>
    (await harness.metrics.httpConnections.get()).values.find((v) => v.labels.listener === 'socket')?.value ??
    0;

  it('many idle connections at the limit: the oldest idle one is closed to admit each new one', async () => {
    const harness = await serveAdmin(handleText, { connectionLimits: small() });
    h = harness;
    const idle = [];
    for (let i = 0; i < 10; i++) idle.push(await rawConnection(harness.socket));
    // The first six were evicted, oldest first; the last four are still open.
    await Promise.all(idle.slice(0, 6).map((c) => c.closed));
    expect(await harness.closed('evicted')).toBe(6);
    expect(idle.slice(6).every((c) => !c.sock.destroyed)).toBe(true);
    // status and /readyz answer (each evicting one more idle connection).
    expect((await requestUnix(harness.socket, 'POST', '/rpc', STATUS)).status).toBe(200);
    expect((await requestUnix(harness.socket, 'GET', '/readyz')).status).toBe(200);
    expect(await openConnections(harness)).toBeLessThanOrEqual(4);
    for (const c of idle) c.sock.destroy();
  });

  it('every connection busy: the reserve answers status and /readyz only; past it, connections are closed', async () => {
    const harness = await serveAdmin(handleText, { connectionLimits: small() });
    h = harness;
    waiting = 0;
    const busy = [];
    for (let i = 0; i < 4; i++) {
      const c = await rawConnection(harness.socket);
      c.sock.write(
        `POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${WAIT.length}\r\n\r\n${WAIT}`,
      );
      busy.push(c);
    }
    // The four requests are under way: no connection is idle.
    await vi.waitFor(() => expect(waiting).toBe(4));
    // A connection from the reserve (kept alive): status, /readyz, /healthz answer...
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (method: string, url: string, body?: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(
          {
            agent,
            socketPath: harness.socket,
            method,
            path: url,
            headers: body === undefined ? {} : { 'content-type': 'application/json' },
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    expect((await get('POST', '/rpc', STATUS)).status).toBe(200);
    expect((await get('GET', '/readyz')).status).toBe(200);
    expect((await get('GET', '/healthz')).status).toBe(200);
    // ...another route or method is refused, naming the limit, and the connection closed.
    const refused = await get('GET', '/metrics');
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { data: { code: 'UNAVAILABLE' } } });
    expect(JSON.parse(refused.body).error.message).toContain('limit of 4 connections');
    expect(await harness.closed('reserve_only')).toBe(1);
    await vi.waitFor(async () => expect(await openConnections(harness)).toBe(4));
    const anotherCall = await get('POST', '/rpc', WAIT.replace('operations.wait', 'operations.list'));
    expect(anotherCall.status).toBe(503);
    expect(await harness.closed('reserve_only')).toBe(2);
    await vi.waitFor(async () => expect(await openConnections(harness)).toBe(4));
    // The reserve held by one idle connection, nothing evictable: the next one is closed at once.
    const held = await rawConnection(harness.socket);
    const over = await rawConnection(harness.socket);
    await over.closed;
    expect(over.received()).toBe('');
    expect(await harness.closed('refused')).toBe(1);
    expect(await harness.closed('evicted')).toBe(0);
    expect(busy.every((c) => !c.sock.destroyed)).toBe(true);
    agent.destroy();
    held.sock.destroy();
    for (const c of busy) c.sock.destroy();
  });

  it('a connection that sends nothing is answered 408 and closed after the headers timeout', async () => {
    const harness = await serveAdmin(handleText, {
      connectionLimits: small({ headersTimeoutMs: 100, requestTimeoutMs: 200, timeoutCheckMs: 20 }),
    });
    h = harness;
    const silent = await rawConnection(harness.socket);
    await silent.closed;
    expect(silent.received()).toMatch(/^HTTP\/1\.1 408 /);
    // Headers begun and never ended: the same.
    const slow = await rawConnection(harness.socket);
    slow.sock.write('GET /healthz HTTP/1.1\r\nhost: x\r\n');
    await slow.closed;
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('an idle keep-alive connection is closed after the keep-alive timeout', async () => {
    const harness = await serveAdmin(handleText, { connectionLimits: small({ keepAliveTimeoutMs: 50 }) });
    h = harness;
    const c = await rawConnection(harness.socket);
    c.sock.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 200 /);
  });
});
