import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createSdNotifier, watchdogIntervalMs } from '../../../src/daemon/sd-notify.js';
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
