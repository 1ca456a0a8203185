/**
 * agentd's D-Bus client (src/host/dbus/) against a real message bus: Debian's `dbus-daemon`,
 * started on a socket in a temp dir with a config of its own, asked what it answers itself (the
 * org.freedesktop.DBus interface and its properties, its errors). The node check speaks the same
 * client to machined and the machines' systemd; the real-host suite holds that part to systemd
 * (test/host/machine-bus.test.ts). Skipped when dbus-daemon is missing, unless
 * AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/host/clock.js';
import { BusConnectionError, DBusError, openBus } from '../../src/host/dbus/connection.js';
import type { BusConnection } from '../../src/host/dbus/connection.js';
import { hasTool } from '../support/provision-fixtures.js';

const available = hasTool('dbus-daemon');
const required = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';
const call = { timeoutMs: 5_000 };
const DBUS = { destination: 'org.freedesktop.DBus', path: '/org/freedesktop/DBus' };

describe.skipIf(!available && !required)('the D-Bus client against dbus-daemon', () => {
  let dir: string;
  let daemon: ChildProcess | undefined;
  let socket: string;

  beforeAll(async () => {
    if (!available)
      throw new Error('AGENTD_REQUIRE_SYSTEM_TESTS=1 but dbus-daemon (package dbus-daemon) is not installed');
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-dbus-'));
    socket = path.join(dir, 'bus');
    const config = path.join(dir, 'bus.conf');
    await writeFile(
      config,
      [
        '<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"',
        ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">',
        '<busconfig>',
        '  <type>session</type>',
        `  <listen>unix:path=${socket}</listen>`,
        '  <auth>EXTERNAL</auth>',
        '  <policy context="default"><allow send_destination="*"/><allow receive_sender="*"/><allow own="*"/></policy>',
        '</busconfig>',
      ].join('\n'),
    );
    const proc = spawn('dbus-daemon', [`--config-file=${config}`, '--nofork', '--print-address'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    daemon = proc;
    // Its stderr (a warning that it may not raise its fd limit, here) goes into a failure's message.
    let stderr = '';
    proc.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    // It prints its address once it listens.
    await new Promise<void>((resolve, reject) => {
      proc.once('error', reject);
      proc.once('exit', (code) => reject(new Error(`dbus-daemon exited with ${code}: ${stderr}`)));
      proc.stdout?.once('data', () => resolve());
    });
  });

  afterAll(async () => {
    if (daemon && daemon.exitCode === null) {
      const exited = new Promise((resolve) => daemon?.once('exit', resolve));
      daemon.kill('SIGTERM');
      await exited;
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const open = (): Promise<BusConnection> => openBus(socket, { hello: true, clock: systemClock, ...call });

  it('says Hello, then calls methods and reads their replies', async () => {
    const bus = await open();
    try {
      const id = await bus.call({ ...DBUS, interface: 'org.freedesktop.DBus', member: 'GetId' }, call);
      expect(id.signature).toBe('s');
      expect(id.body[0]).toMatch(/^[0-9a-f]{32}$/);
      const names = await bus.call({ ...DBUS, interface: 'org.freedesktop.DBus', member: 'ListNames' }, call);
      expect(names.signature).toBe('as');
      expect(names.body[0]).toEqual(
        expect.arrayContaining(['org.freedesktop.DBus', expect.stringMatching(/^:1\.\d+$/)]),
      );
      // A string argument goes out as the daemon expects it.
      const owner = await bus.call(
        {
          ...DBUS,
          interface: 'org.freedesktop.DBus',
          member: 'GetNameOwner',
          args: ['org.freedesktop.DBus'],
        },
        call,
      );
      expect(owner.body).toEqual(['org.freedesktop.DBus']);
    } finally {
      bus.close();
    }
  });

  it('reads a property as a variant, as the node check reads ActiveState and Leader', async () => {
    const bus = await open();
    try {
      const reply = await bus.call(
        {
          ...DBUS,
          interface: 'org.freedesktop.DBus.Properties',
          member: 'Get',
          args: ['org.freedesktop.DBus', 'Interfaces'],
        },
        call,
      );
      expect(reply.signature).toBe('v');
      expect(reply.body[0]).toEqual({
        signature: 'as',
        value: expect.arrayContaining(['org.freedesktop.DBus.Monitoring']),
      });
    } finally {
      bus.close();
    }
  });

  it('turns an error reply into a DBusError with its name and message, and keeps the connection', async () => {
    const bus = await open();
    try {
      const err = await bus
        .call(
          {
            ...DBUS,
            interface: 'org.freedesktop.DBus',
            member: 'GetNameOwner',
            args: ['org.example.Nobody'],
          },
          call,
        )
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DBusError);
      expect((err as DBusError).errorName).toBe('org.freedesktop.DBus.Error.NameHasNoOwner');
      expect((err as DBusError).message).toContain('org.example.Nobody');
      const missing = await bus
        .call({ destination: 'org.example.Nobody', path: '/', interface: 'org.example.X', member: 'Y' }, call)
        .catch((e: unknown) => e);
      expect((missing as DBusError).errorName).toBe('org.freedesktop.DBus.Error.ServiceUnknown');
      expect(bus.closed).toBe(false);
    } finally {
      bus.close();
    }
  });

  it('answers calls made at once, each with its own reply', async () => {
    const bus = await open();
    try {
      const replies = await Promise.all(
        ['org.freedesktop.DBus', 'org.example.Nobody', 'org.freedesktop.DBus'].map((name) =>
          bus
            .call({ ...DBUS, interface: 'org.freedesktop.DBus', member: 'NameHasOwner', args: [name] }, call)
            .then((m) => m.body[0]),
        ),
      );
      expect(replies).toEqual([true, false, true]);
    } finally {
      bus.close();
    }
  });

  it('fails a call on a closed connection with the reason', async () => {
    const bus = await open();
    bus.close();
    expect(bus.closed).toBe(true);
    await expect(
      bus.call({ ...DBUS, interface: 'org.freedesktop.DBus', member: 'GetId' }, call),
    ).rejects.toThrow(BusConnectionError);
  });
});
