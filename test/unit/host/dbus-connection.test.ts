/**
 * How the D-Bus client fails: a missing socket, a refused authentication, a peer that never
 * answers (the deadline, on the injected clock), a cancelled call, a peer that hangs up or sends
 * garbage. The happy path is tested against a real dbus-daemon (test/system/dbus.test.ts).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CancelledError, TimeoutError } from '../../../src/errors.js';
import { BusConnectionError, openBus } from '../../../src/host/dbus/connection.js';
import type { Message } from '../../../src/host/dbus/wire.js';
import { startFakeBus, type Answer, type FakeBus } from '../../support/fake-dbus.js';
import { createManualClock, settle } from '../../support/manual-clock.js';

let dir: string;
let server: Server | undefined;
let bus: FakeBus | undefined;
const peers: Socket[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-dbus-conn-'));
});
afterEach(async () => {
  for (const p of peers.splice(0)) p.destroy();
  await bus?.close();
  bus = undefined;
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
  await rm(dir, { recursive: true, force: true });
});

/** A scripted bus (test/support/fake-dbus.ts) at the usual path; its path. */
async function fakeBus(answer: (call: Message) => Answer): Promise<string> {
  const socketPath = path.join(dir, 'bus');
  bus = await startFakeBus(socketPath, answer);
  return socketPath;
}

/** A raw peer on a unix socket that runs `onConnect` for each client (no SASL); its path. */
async function peer(onConnect: (socket: Socket) => void): Promise<string> {
  const socketPath = path.join(dir, 'bus');
  server = createServer((socket) => {
    peers.push(socket);
    socket.on('error', () => undefined);
    onConnect(socket);
  });
  await new Promise<void>((resolve) => server?.listen(socketPath, resolve));
  return socketPath;
}

const call = { path: '/', interface: 'org.example.Test', member: 'Ask' };

describe('D-Bus connection failures', () => {
  it('names the socket and the system error when there is no bus', async () => {
    const clock = createManualClock();
    const err = await openBus(path.join(dir, 'nothing-here'), { hello: false, clock, timeoutMs: 1000 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(BusConnectionError);
    expect((err as BusConnectionError).code).toBe('ENOENT');
    expect((err as Error).message).toContain(path.join(dir, 'nothing-here'));
  });

  it('reports a refused authentication with the peer’s answer', async () => {
    const socketPath = await peer((s) => s.once('data', () => s.write('REJECTED EXTERNAL\r\n')));
    const clock = createManualClock();
    await expect(openBus(socketPath, { hello: true, clock, timeoutMs: 1000 })).rejects.toThrow(
      /refused authentication as uid \d+: REJECTED EXTERNAL/,
    );
  });

  it('gives up on a peer that never answers at the deadline, on the injected clock', async () => {
    const socketPath = await peer(() => undefined);
    const clock = createManualClock();
    const opening = openBus(socketPath, { hello: true, clock, timeoutMs: 2000 }).catch((e: unknown) => e);
    await settle(10);
    await clock.advance(1999);
    await settle();
    await clock.advance(1);
    const err = await opening;
    expect(err).toBeInstanceOf(TimeoutError);
    expect((err as Error).message).toMatch(/connect to D-Bus at .*bus: timed out after 2000 ms/);
  });

  it('ends a call at its deadline and keeps serving the next one', async () => {
    let answered = 0;
    // The first call gets no answer; later ones get an empty method return.
    const socketPath = await fakeBus(() => (answered++ === 0 ? 'none' : { values: [] }));
    const clock = createManualClock();
    const bus = await openBus(socketPath, { hello: false, clock, timeoutMs: 1000 });
    try {
      const first = bus.call(call, { timeoutMs: 500 }).catch((e: unknown) => e);
      await settle(5);
      await clock.advance(500);
      expect(await first).toBeInstanceOf(TimeoutError);
      const second = await bus.call(call, { timeoutMs: 500 });
      expect(second.replySerial).toBe(2);
    } finally {
      bus.close();
    }
  });

  it('cancels a call when the caller’s signal aborts', async () => {
    const socketPath = await fakeBus(() => 'none');
    const clock = createManualClock();
    const bus = await openBus(socketPath, { hello: false, clock, timeoutMs: 1000 });
    try {
      const ac = new AbortController();
      const pending = bus.call(call, { timeoutMs: 1000, signal: ac.signal }).catch((e: unknown) => e);
      await settle(5);
      ac.abort();
      expect(await pending).toBeInstanceOf(CancelledError);
    } finally {
      bus.close();
    }
  });

  it('fails the calls under way when the peer hangs up, and every later one', async () => {
    const socketPath = await fakeBus(() => 'hangup');
    const clock = createManualClock();
    const bus = await openBus(socketPath, { hello: false, clock, timeoutMs: 1000 });
    await expect(bus.call(call, { timeoutMs: 1000 })).rejects.toThrow(/closed the connection/);
    expect(bus.closed).toBe(true);
    await expect(bus.call(call, { timeoutMs: 1000 })).rejects.toBeInstanceOf(BusConnectionError);
  });

  it('closes the connection on a message that does not follow the format, saying why', async () => {
    const socketPath = await fakeBus(() => ({ raw: Buffer.from('Xnot a message at all, but long enough') }));
    const clock = createManualClock();
    const bus = await openBus(socketPath, { hello: false, clock, timeoutMs: 1000 });
    await expect(bus.call(call, { timeoutMs: 1000 })).rejects.toThrow(
      /malformed D-Bus message: unknown byte order mark 0x58/,
    );
    expect(bus.closed).toBe(true);
  });
});
