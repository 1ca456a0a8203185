/**
 * The event stream of a wedged daemon does not hold agentctl forever (src/cli/follow/event-stream.ts):
 * no answer to the request within the call timeout is a timeout, and an open stream that stays
 * silent (not even the keep-alive) past its idle limit ends, as if the daemon had closed it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openEventStream } from '../../../../src/cli/follow/event-stream.js';
import { DaemonUnreachableError } from '../../../../src/rpc/http-transport.js';

let dir: string;
let server: http.Server | null = null;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-stream-'));
});
afterEach(async () => {
  const s = server;
  server = null;
  if (s) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
  await rm(dir, { recursive: true, force: true });
});

async function listen(handler: http.RequestListener): Promise<string> {
  const socket = path.join(dir, 'agentd.sock');
  server = http.createServer(handler);
  await new Promise<void>((resolve) => server?.listen(socket, resolve));
  return socket;
}

describe('openEventStream', () => {
  it('a daemon that does not answer the request: a timeout error naming the socket', async () => {
    const socket = await listen(() => undefined);
    const err = await openEventStream(socket, 'op-1', { answerTimeoutMs: 50, idleMs: 60_000 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DaemonUnreachableError);
    expect(err).toMatchObject({ reason: 'timeout', socketPath: socket });
    expect((err as Error).message).toContain('no answer to GET /v1/events within 50 ms');
  });

  it('a stream that falls silent ends after the idle limit; events before it are kept', async () => {
    const socket = await listen((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': agentd event stream\n\n');
      res.write('event: operation\ndata: {"type":"operation","operation":{"id":"op-1"}}\n\n');
      // …and then nothing, not even a keep-alive: a wedged daemon.
    });
    const stream = await openEventStream(socket, 'op-1', { answerTimeoutMs: 60_000, idleMs: 100 });
    const events: unknown[] = [];
    for await (const e of stream) events.push(e);
    expect(events).toEqual([{ type: 'operation', operation: { id: 'op-1' } }]);
  });
});
