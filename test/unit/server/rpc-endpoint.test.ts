import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../../src/rpc/dispatcher.js';
import { createRpcEndpoint } from '../../../src/server/rpc-endpoint.js';
import { requestUnix } from '../../support/daemon.js';

describe('createRpcEndpoint', () => {
  let dir: string;
  let server: http.Server | null = null;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-endpoint-'));
  });
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r) ?? r(undefined));
    server = null;
    await rm(dir, { recursive: true, force: true });
  });

  async function serve(handleText: Dispatcher['handleText'], closing = false): Promise<string> {
    const dispatcher: Dispatcher = { handle: async () => null, handleText, refused: () => undefined };
    const endpoint = createRpcEndpoint({
      dispatcher,
      logger: pino({ level: 'silent' }),
      isClosing: () => closing,
    });
    const socket = path.join(dir, 'e.sock');
    server = http.createServer(endpoint);
    await new Promise<void>((r) => server!.listen(socket, r));
    return socket;
  }

  it('answers 503 with DRAINING once the server is closing, without dispatching', async () => {
    let calls = 0;
    const socket = await serve(() => {
      calls++;
      return null;
    }, true);
    const res = await requestUnix(socket, 'POST', '/rpc', '{"jsonrpc":"2.0","id":1,"method":"status"}');
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body)).toMatchObject({
      id: null,
      error: { code: 1002, data: { code: 'DRAINING' } },
    });
    expect(calls).toBe(0);
  });

  it.each([
    [
      'throws',
      () => {
        throw new Error('boom');
      },
    ],
    ['rejects', () => Promise.reject(new Error('boom'))],
  ])('a dispatcher that %s gives 500 INTERNAL, not a hung request', async (_what, handleText) => {
    const socket = await serve(handleText);
    const res = await requestUnix(socket, 'POST', '/rpc', '{}');
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body)).toMatchObject({ id: null, error: { data: { code: 'INTERNAL' } } });
  });

  it('answers an asynchronous answer when it arrives', async () => {
    const socket = await serve(async (text) => {
      await new Promise((r) => setTimeout(r, 20));
      return `{"jsonrpc":"2.0","id":null,"result":${JSON.stringify(text)}}`;
    });
    const res = await requestUnix(socket, 'POST', '/rpc', '"hi"');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ jsonrpc: '2.0', id: null, result: '"hi"' });
    expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.body));
  });
});
