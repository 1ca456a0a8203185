import { mkdtemp, rm } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { bindLibc } from '../../../src/daemon/ffi.js';
import {
  createSdNotifier,
  loadDatagramSender,
  notifyMessage,
  sockaddrUn,
  watchdogIntervalMs,
} from '../../../src/daemon/sd-notify.js';
import { createFakeClock } from '../host/fake-clock.js';

const logger = pino({ enabled: false });

function recorder(fail = false): { calls: string[][]; send: (args: string[]) => Promise<void> } {
  const calls: string[][] = [];
  return {
    calls,
    // Answers on a later turn of the event loop, as a child process would (the fake clock's
    // sleeps return at once, so the watchdog loop must yield somewhere).
    send: async (args) => {
      calls.push(args);
      await new Promise((res) => setImmediate(res));
      if (fail) throw new Error('no socket');
    },
  };
}

describe('sd_notify', () => {
  it('sends nothing outside systemd (no NOTIFY_SOCKET)', async () => {
    const r = recorder();
    const n = createSdNotifier({ env: {}, logger, clock: createFakeClock(), pid: 42, send: r.send });
    expect(n.enabled).toBe(false);
    await n.ready('x');
    await n.stopping('y');
    n.startWatchdog()();
    expect(r.calls).toEqual([]);
  });

  it('sends READY=1 and STOPPING=1 on behalf of the daemon PID', async () => {
    const r = recorder();
    const env = { NOTIFY_SOCKET: '/run/systemd/notify' };
    const n = createSdNotifier({ env, logger, clock: createFakeClock(), pid: 42, send: r.send });
    await n.ready('serving on /run/agentd/agentd.sock');
    await n.stopping('shutting down (SIGTERM)');
    expect(r.calls).toEqual([
      ['--pid=42', '--ready', '--status=serving on /run/agentd/agentd.sock'],
      ['--pid=42', 'STOPPING=1', '--status=shutting down (SIGTERM)'],
    ]);
  });

  it('a message that cannot be sent is not an error', async () => {
    const r = recorder(true);
    const n = createSdNotifier({
      env: { NOTIFY_SOCKET: '@x' },
      logger,
      clock: createFakeClock(),
      send: r.send,
    });
    await expect(n.ready('x')).resolves.toBeUndefined();
    expect(r.calls).toHaveLength(1);
  });

  it('reads the watchdog interval only when it is meant for this process', () => {
    expect(watchdogIntervalMs({}, 42)).toBeNull();
    expect(watchdogIntervalMs({ WATCHDOG_USEC: '120000000' }, 42)).toBe(120_000);
    expect(watchdogIntervalMs({ WATCHDOG_USEC: '120000000', WATCHDOG_PID: '42' }, 42)).toBe(120_000);
    expect(watchdogIntervalMs({ WATCHDOG_USEC: '120000000', WATCHDOG_PID: '7' }, 42)).toBeNull();
    expect(watchdogIntervalMs({ WATCHDOG_USEC: 'soon' }, 42)).toBeNull();
  });

  it('pings the watchdog at half its interval until stopped', async () => {
    const r = recorder();
    const clock = createFakeClock();
    const env = { NOTIFY_SOCKET: '@x', WATCHDOG_USEC: '120000000' };
    const n = createSdNotifier({ env, logger, clock, pid: 42, send: r.send });
    const stop = n.startWatchdog();
    for (let i = 0; i < 20 && r.calls.length < 3; i++) await new Promise((res) => setImmediate(res));
    stop();
    const pings = r.calls.length;
    expect(pings).toBeGreaterThanOrEqual(3);
    expect(r.calls[0]).toEqual(['--pid=42', 'WATCHDOG=1']);
    expect(clock.sleeps.slice(0, 3)).toEqual([60_000, 60_000, 60_000]);
    for (let i = 0; i < 5; i++) await new Promise((res) => setImmediate(res));
    expect(r.calls.length).toBe(pings);
  });
});

describe('sd_notify from agentd itself', () => {
  it('writes a sockaddr_un for a path and for an abstract address', () => {
    const p = sockaddrUn('/run/systemd/notify');
    expect(p.readUInt16LE(0)).toBe(1);
    expect(p.subarray(2).toString()).toBe('/run/systemd/notify\0');
    const a = sockaddrUn('@/org/freedesktop/systemd1/notify/123');
    expect([...a.subarray(0, 3)]).toEqual([1, 0, 0]);
    expect(a.subarray(3).toString()).toBe('/org/freedesktop/systemd1/notify/123');
    expect(a.length).toBe(3 + '/org/freedesktop/systemd1/notify/123'.length);
    expect(() => sockaddrUn('')).toThrow(/not a unix socket address/);
    expect(() => sockaddrUn(`/${'x'.repeat(107)}`)).toThrow(/not a unix socket address/);
  });

  it('turns systemd-notify’s arguments into the message', () => {
    expect(notifyMessage(['--ready', '--status=serving on /run/agentd/agentd.sock'])).toBe(
      'READY=1\nSTATUS=serving on /run/agentd/agentd.sock',
    );
    expect(notifyMessage(['STOPPING=1', '--status=shutting down (SIGTERM)'])).toBe(
      'STOPPING=1\nSTATUS=shutting down (SIGTERM)',
    );
    expect(notifyMessage(['WATCHDOG=1'])).toBe('WATCHDOG=1');
  });

  it('sends from this process when it is the PID systemd knows, with no systemd-notify', async () => {
    const r = recorder();
    const sent: Array<[string, string]> = [];
    const n = createSdNotifier({
      env: { NOTIFY_SOCKET: '/run/systemd/notify' },
      logger,
      clock: createFakeClock(),
      pid: process.pid,
      send: r.send,
      datagram: (address, message) => sent.push([address, message]),
    });
    await n.ready('serving');
    expect(sent).toEqual([['/run/systemd/notify', 'READY=1\nSTATUS=serving']]);
    expect(r.calls).toEqual([]);
  });

  it('uses systemd-notify only when told to (datagram: null)', async () => {
    const r = recorder();
    const lines: string[] = [];
    const n = createSdNotifier({
      // No such socket: a send attempted anyway would fail and warn.
      env: { NOTIFY_SOCKET: '/nonexistent/agentd-test/notify' },
      logger: pino({}, { write: (l: string) => lines.push(l) }),
      clock: createFakeClock(),
      pid: process.pid,
      send: r.send,
      datagram: null,
    });
    await n.ready('serving');
    expect(r.calls).toEqual([[`--pid=${process.pid}`, '--ready', '--status=serving']]);
    expect(lines).toEqual([]);
  });

  it('falls back to systemd-notify for good, saying so once, when sending fails', async () => {
    const r = recorder();
    const lines: Array<Record<string, unknown>> = [];
    const log = pino({}, { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) });
    let tries = 0;
    const n = createSdNotifier({
      env: { NOTIFY_SOCKET: '/run/systemd/notify' },
      logger: log,
      clock: createFakeClock(),
      pid: process.pid,
      send: r.send,
      datagram: () => {
        tries++;
        throw new Error('sending to NOTIFY_SOCKET /run/systemd/notify failed');
      },
    });
    await n.ready('serving');
    await n.stopping('shutting down');
    expect(tries).toBe(1);
    expect(r.calls).toEqual([
      [`--pid=${process.pid}`, '--ready', '--status=serving'],
      [`--pid=${process.pid}`, 'STOPPING=1', '--status=shutting down'],
    ]);
    expect(lines.filter((l) => l.level === 40)).toMatchObject([
      { msg: expect.stringContaining('using systemd-notify'), err: expect.stringContaining('failed') },
    ]);
  });

  // Asked without loading it: a load here would print the warning agentd keeps quiet.
  const hasFfi = builtinModules.includes('ffi') || builtinModules.includes('node:ffi');

  it.skipIf(hasFfi)('has no datagram sender on a runtime without node:ffi', () => {
    expect(loadDatagramSender()).toBeNull();
  });

  it.runIf(hasFfi)(
    'delivers the message to a unix datagram socket, by path and by abstract address',
    async () => {
      // The receiving end, bound through libc as well (Node has no unix datagram socket).
      const socket = bindLibc('socket', { arguments: ['int32', 'int32', 'int32'], return: 'int32' })!;
      const bind = bindLibc('bind', { arguments: ['int32', 'buffer', 'uint32'], return: 'int32' })!;
      const recv = bindLibc('recv', { arguments: ['int32', 'buffer', 'uint64', 'int32'], return: 'int64' })!;
      const close = bindLibc('close', { arguments: ['int32'], return: 'int32' })!;
      const MSG_DONTWAIT = 0x40;
      const send = loadDatagramSender()!;
      const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-notify-'));
      try {
        for (const address of [path.join(dir, 'notify'), `@agentd-test-notify-${process.pid}`]) {
          const fd = Number(socket(1, 2, 0));
          expect(fd).toBeGreaterThanOrEqual(0);
          try {
            const sa = sockaddrUn(address);
            expect(bind(fd, sa, sa.length)).toBe(0);
            send(address, 'READY=1\nSTATUS=serving');
            const buf = Buffer.alloc(256);
            const n = Number(recv(fd, buf, BigInt(buf.length), MSG_DONTWAIT));
            expect(buf.subarray(0, Math.max(n, 0)).toString()).toBe('READY=1\nSTATUS=serving');
          } finally {
            close(fd);
          }
        }
        // Nobody listening: the sender says so (and the notifier falls back).
        expect(() => send(path.join(dir, 'none'), 'WATCHDOG=1')).toThrow(/failed/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
