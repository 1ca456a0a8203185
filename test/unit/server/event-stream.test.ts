import { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EngineEvent } from '../../../src/engine/events.js';
import { DEFAULT_TIMEOUTS } from '../../../src/server/connection-guard.js';
import { rawConnection, serveAdmin, type Harness } from './admin-app-harness.js';

const BUFFER = 16 * 1024;

/** A progress event of about `size` bytes on the wire. */
function bigEvent(size: number): EngineEvent {
  return {
    type: 'progress',
    operationId: 'op-1',
    phase: 'provision',
    task: 'download',
    message: 'x'.repeat(size),
    at: '2026-01-01T00:00:00Z',
  };
}

describe('/v1/events: a bounded buffer per client', () => {
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  const GET = 'GET /v1/events HTTP/1.1\r\nhost: x\r\n\r\n';

  it('a client that does not read is disconnected once its unread bytes pass the limit, and counted', async () => {
    const harness = await serveAdmin(() => null, { sseBufferBytes: BUFFER });
    h = harness;
    const client = await rawConnection(harness.socket);
    client.sock.write(GET);
    await vi.waitFor(() => expect(harness.events.listenerCount).toBe(1));
    // It reads nothing more: the kernel's socket buffers fill, then the daemon's.
    client.sock.pause();
    let published = 0;
    while ((await harness.closed('slow_reader')) === 0) {
      harness.events.publish(bigEvent(1024));
      published++;
      // Far past any socket buffer: the limit failed to act.
      expect(published).toBeLessThan(20_000);
    }
    await vi.waitFor(() => expect(harness.events.listenerCount).toBe(0));
    client.sock.resume();
    await client.closed;
    // What it got ends short of what was published: it was cut, not drained.
    expect(client.received().split('event: progress').length - 1).toBeLessThan(published);
  });

  it('a client that reads keeps its stream through the same number of events', async () => {
    const harness = await serveAdmin(() => null, { sseBufferBytes: BUFFER });
    h = harness;
    const client = await rawConnection(harness.socket);
    client.sock.write(GET);
    await vi.waitFor(() => expect(harness.events.listenerCount).toBe(1));
    const events = 2000;
    for (let i = 0; i < events; i++) {
      harness.events.publish(bigEvent(1024));
      // Give the socket a turn now and then, as the engine's events come: a few at a time.
      if (i % 8 === 7) await new Promise((r) => setImmediate(r));
    }
    await vi.waitFor(() => expect(client.received().split('event: progress').length - 1).toBe(events));
    expect(await harness.closed('slow_reader')).toBe(0);
    expect(harness.events.listenerCount).toBe(1);
    client.sock.destroy();
  });

  it('an open stream outlives the request and headers timeouts: they bound a request, not its answer', async () => {
    const harness = await serveAdmin(() => null, {
      sseHeartbeatMs: 20,
      connectionLimits: {
        maxConnections: 4,
        reserve: 1,
        ...DEFAULT_TIMEOUTS,
        headersTimeoutMs: 50,
        requestTimeoutMs: 100,
        timeoutCheckMs: 10,
      },
    });
    h = harness;
    const client = await rawConnection(harness.socket);
    client.sock.write(GET);
    // 25 keep-alives at 20 ms: the stream has been open for 5 request timeouts, checked 50 times.
    await vi.waitFor(
      () => expect(client.received().split(': keep-alive').length - 1).toBeGreaterThanOrEqual(25),
      {
        timeout: 5000,
      },
    );
    expect(client.sock.destroyed).toBe(false);
    expect(client.received()).not.toContain('408');
    client.sock.destroy();
  });

  it('on close, a stream stops its events and its heartbeat before it ends: nothing is written after the end', async () => {
    const harness = await serveAdmin(() => null, { sseHeartbeatMs: 5 });
    h = harness;
    const client = await rawConnection(harness.socket);
    client.sock.write(GET);
    await vi.waitFor(() => expect(harness.events.listenerCount).toBe(1));
    // Node 26 threw ERR_STREAM_WRITE_AFTER_END from a heartbeat that came between the end and
    // the response's close: the stream's subscription must be gone when the end is called.
    const atEnd: number[] = [];
    const end = vi.spyOn(ServerResponse.prototype, 'end').mockImplementation(function (
      this: ServerResponse,
      ...args: Parameters<ServerResponse['end']>
    ) {
      atEnd.push(harness.events.listenerCount);
      end.mockRestore();
      return this.end(...args);
    });
    try {
      await harness.close();
      h = null;
    } finally {
      end.mockRestore();
    }
    expect(atEnd).toEqual([0]);
    await client.closed;
  });
});
