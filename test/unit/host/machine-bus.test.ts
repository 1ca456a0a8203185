/**
 * The node check over D-Bus (src/host/machine-bus.ts) against scripted buses under a temp root:
 * machined on the host's bus, kubelet's unit on the machine's bus under /proc/<leader>/root. It
 * answers what the commands would, and null (the caller runs the commands) whenever it cannot.
 * The real-host suite holds the same questions to real machined and systemd.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createServer, type Socket } from 'node:net';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CancelledError } from '../../../src/errors.js';
import { systemClock } from '../../../src/host/clock.js';
import { busLabel, createMachineBus, SYSTEM_BUS_SOCKET } from '../../../src/host/machine-bus.js';
import type { MachineBus } from '../../../src/host/machine-bus.js';
import { createHostPaths } from '../../../src/host/paths.js';
import type { Message } from '../../../src/host/dbus/wire.js';
import { startFakeBus, type Answer, type FakeBus } from '../../support/fake-dbus.js';
import { createManualClock } from '../../support/manual-clock.js';

const LEADER = 4242;
const ask = { timeoutMs: 5_000 };

let root: string;
let buses: FakeBus[];
let lines: Array<Record<string, unknown>>;
let bus: MachineBus;

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'agentd-mbus-'));
  buses = [];
  lines = [];
  const logger = pino(
    { level: 'debug' },
    { write: (s: string) => lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  bus = createMachineBus({ paths: createHostPaths(root), clock: systemClock, logger });
});
afterEach(async () => {
  bus.close();
  for (const b of buses) await b.close();
  await rm(root, { recursive: true, force: true });
});

async function fakeAt(hostPath: string, answer: (call: Message) => Answer): Promise<FakeBus> {
  const socket = path.join(root, hostPath);
  await mkdir(path.dirname(socket), { recursive: true });
  const b = await startFakeBus(socket, answer);
  buses.push(b);
  return b;
}

/** machined knowing `machines` (name → leader). */
const machined =
  (machines: Record<string, number>, other?: (call: Message) => Answer | undefined) =>
  (call: Message): Answer => {
    const special = other?.(call);
    if (special) return special;
    if (call.member === 'GetMachine') {
      const name = String(call.body[0]);
      return name in machines
        ? { values: [{ o: `/org/freedesktop/machine1/machine/${name}` }] }
        : { error: 'org.freedesktop.machine1.NoSuchMachine', message: `No machine '${name}' known` };
    }
    if (call.member === 'Get' && call.body[1] === 'Leader') {
      const name = String(call.path).split('/').pop() ?? '';
      return { values: [{ v: { u: machines[name] ?? 0 } }] };
    }
    return { error: 'org.freedesktop.DBus.Error.UnknownMethod', message: String(call.member) };
  };

const insideBus = (leader: number): string => `/proc/${leader}/root${SYSTEM_BUS_SOCKET}`;
const infoLines = (): string[] => lines.filter((l) => l.level === 30).map((l) => String(l.msg));

describe('the node check over D-Bus', () => {
  it('escapes unit names into object paths as systemd does', () => {
    expect(busLabel('kubelet.service')).toBe('kubelet_2eservice');
    expect(busLabel('systemd-nspawn@kube1.service')).toBe('systemd_2dnspawn_40kube1_2eservice');
    expect(busLabel('1x')).toBe('_31x');
  });

  it('says not registered when machined knows no such machine, over one connection for every check', async () => {
    const host = await fakeAt(SYSTEM_BUS_SOCKET, machined({}));
    expect(await bus.inspect('kube2', ask)).toEqual({ registered: false });
    expect(await bus.inspect('kube2', ask)).toEqual({ registered: false });
    expect(host.connections).toBe(1);
    expect(host.calls.map((c) => [c.destination, c.path, c.interface, c.member, c.body])).toEqual([
      [
        'org.freedesktop.machine1',
        '/org/freedesktop/machine1',
        'org.freedesktop.machine1.Manager',
        'GetMachine',
        ['kube2'],
      ],
      [
        'org.freedesktop.machine1',
        '/org/freedesktop/machine1',
        'org.freedesktop.machine1.Manager',
        'GetMachine',
        ['kube2'],
      ],
    ]);
    expect(infoLines()).toEqual(['node checks ask machined and the machines’ systemd over D-Bus']);
  });

  it('asks a registered machine’s own systemd, on its bus under its leader’s root, for kubelet’s ActiveState', async () => {
    const host = await fakeAt(SYSTEM_BUS_SOCKET, machined({ kube1: LEADER }));
    const inside = await fakeAt(insideBus(LEADER), () => ({ values: [{ v: { s: 'activating' } }] }));
    expect(await bus.inspect('kube1', ask)).toEqual({ registered: true, activeState: 'activating' });
    expect(host.calls.map((c) => [c.path, c.member, c.body])).toEqual([
      ['/org/freedesktop/machine1', 'GetMachine', ['kube1']],
      ['/org/freedesktop/machine1/machine/kube1', 'Get', ['org.freedesktop.machine1.Machine', 'Leader']],
    ]);
    expect(inside.calls.map((c) => [c.destination, c.path, c.interface, c.member, c.body])).toEqual([
      [
        'org.freedesktop.systemd1',
        '/org/freedesktop/systemd1/unit/kubelet_2eservice',
        'org.freedesktop.DBus.Properties',
        'Get',
        ['org.freedesktop.systemd1.Unit', 'ActiveState'],
      ],
    ]);
  });

  it('keeps a machine’s connection between checks while its leader stays, and connects anew for a new leader', async () => {
    const leaders: Record<string, number> = { kube1: LEADER };
    await fakeAt(SYSTEM_BUS_SOCKET, machined(leaders));
    let state = 'active';
    const first = await fakeAt(insideBus(LEADER), () => ({ values: [{ v: { s: state } }] }));
    expect(await bus.inspect('kube1', ask)).toEqual({ registered: true, activeState: 'active' });
    state = 'failed';
    expect(await bus.inspect('kube1', ask)).toEqual({ registered: true, activeState: 'failed' });
    expect(first.connections).toBe(1);
    expect(first.calls).toHaveLength(2);
    // The machine restarted: another leader, another bus.
    leaders.kube1 = LEADER + 1;
    const second = await fakeAt(insideBus(LEADER + 1), () => ({ values: [{ v: { s: 'activating' } }] }));
    expect(await bus.inspect('kube1', ask)).toEqual({ registered: true, activeState: 'activating' });
    expect(second.connections).toBe(1);
    expect(first.calls).toHaveLength(2);
  });

  it('connects to a machine’s bus again after it hung up', async () => {
    await fakeAt(SYSTEM_BUS_SOCKET, machined({ kube1: LEADER }));
    const inside = await fakeAt(insideBus(LEADER), () => ({ values: [{ v: { s: 'active' } }] }));
    expect(await bus.inspect('kube1', ask)).toEqual({ registered: true, activeState: 'active' });
    await inside.close();
    buses.pop();
    const again = await fakeAt(insideBus(LEADER), () => ({ values: [{ v: { s: 'inactive' } }] }));
    let answer = await bus.inspect('kube1', ask);
    if (answer === null) answer = await bus.inspect('kube1', ask);
    expect(answer).toEqual({ registered: true, activeState: 'inactive' });
    expect(again.connections).toBe(1);
  });

  it(
    'stops waiting for a machine’s bus as soon as the caller cancels, not at the deadline',
    { timeout: 5_000 },
    async () => {
      await fakeAt(SYSTEM_BUS_SOCKET, machined({ kube1: LEADER }));
      // The machine's bus accepts the connection and never answers it.
      const socket = path.join(root, insideBus(LEADER));
      await mkdir(path.dirname(socket), { recursive: true });
      const accepted: Socket[] = [];
      let reached!: () => void;
      // The inspection has reached the machine's bus (past machined): the moment to cancel.
      const atMachineBus = new Promise<void>((r) => (reached = r));
      const silent = createServer((c) => {
        accepted.push(c);
        reached();
      });
      await new Promise<void>((resolve) => silent.listen(socket, resolve));
      const clock = createManualClock();
      const slow = createMachineBus({ paths: createHostPaths(root), clock });
      try {
        const ac = new AbortController();
        const pending = slow
          .inspect('kube1', { timeoutMs: 10_000, signal: ac.signal })
          .catch((e: unknown) => e);
        await atMachineBus;
        ac.abort();
        const err = await pending;
        expect(err).toBeInstanceOf(CancelledError);
        expect((err as Error).message).toContain('kube1');
        expect(clock.now()).toBe(createManualClock().now());
      } finally {
        slow.close();
        // The shared open waits for its own deadline; the peer hangs up on it here.
        for (const c of accepted) c.destroy();
        await new Promise<void>((resolve) => silent.close(() => resolve()));
      }
    },
  );

  it('cannot say (null) for a registered machine whose bus does not answer yet, and logs that only at debug', async () => {
    await fakeAt(SYSTEM_BUS_SOCKET, machined({ kube1: LEADER }));
    expect(await bus.inspect('kube1', ask)).toBeNull();
    expect(infoLines()).toEqual(['node checks ask machined and the machines’ systemd over D-Bus']);
    expect(lines.some((l) => l.level === 20 && String(l.err).includes('ENOENT'))).toBe(true);
  });

  it('cannot say when an answer has the wrong type, and names what was wrong', async () => {
    await fakeAt(
      SYSTEM_BUS_SOCKET,
      machined({ kube1: LEADER }, (call) =>
        call.member === 'Get' ? { values: [{ v: { s: 'not a pid' } }] } : undefined,
      ),
    );
    expect(await bus.inspect('kube1', ask)).toBeNull();
    const info = lines.filter((l) => l.level === 30);
    expect(String(info.at(-1)?.reason)).toContain('Leader is not a process id');
  });

  it('cannot say when the machine’s systemd answers with an error', async () => {
    await fakeAt(SYSTEM_BUS_SOCKET, machined({ kube1: LEADER }));
    await fakeAt(insideBus(LEADER), () => ({
      error: 'org.freedesktop.DBus.Error.ServiceUnknown',
      message: 'The name org.freedesktop.systemd1 was not provided by any .service files',
    }));
    expect(await bus.inspect('kube1', ask)).toBeNull();
  });

  it('cannot say without a host bus, and says once, at info, that the checks run the commands', async () => {
    expect(await bus.inspect('kube1', ask)).toBeNull();
    expect(await bus.inspect('kube2', ask)).toBeNull();
    const info = lines.filter((l) => l.level === 30);
    expect(info).toHaveLength(1);
    expect(info[0]?.msg).toBe('node checks run machinectl and systemctl: D-Bus could not answer');
    expect(String(info[0]?.reason)).toContain('ENOENT');
  });

  it('cannot say when machined fails otherwise, and says so again when it answers again', async () => {
    let broken = true;
    await fakeAt(
      SYSTEM_BUS_SOCKET,
      machined({}, () =>
        broken
          ? { error: 'org.freedesktop.DBus.Error.ServiceUnknown', message: 'machined is not running' }
          : undefined,
      ),
    );
    expect(await bus.inspect('kube2', ask)).toBeNull();
    broken = false;
    expect(await bus.inspect('kube2', ask)).toEqual({ registered: false });
    expect(infoLines()).toEqual([
      'node checks run machinectl and systemctl: D-Bus could not answer',
      'node checks ask machined and the machines’ systemd over D-Bus',
    ]);
  });

  it('connects again after the host bus hung up', async () => {
    const host = await fakeAt(SYSTEM_BUS_SOCKET, machined({}));
    expect(await bus.inspect('kube2', ask)).toEqual({ registered: false });
    await host.close();
    buses.pop();
    // The first check after the hang-up cannot say; a new bus is found by the next.
    const again = await fakeAt(SYSTEM_BUS_SOCKET, machined({}));
    let answer = await bus.inspect('kube2', ask);
    if (answer === null) answer = await bus.inspect('kube2', ask);
    expect(answer).toEqual({ registered: false });
    expect(again.connections).toBe(1);
  });
});
