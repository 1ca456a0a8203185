/**
 * The admin socket of the real daemon: permissions, group, bad locations, a second daemon, and
 * a leftover socket from a daemon that died.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { simDaemonFlags } from '../support/daemon-flags.js';
import { makeTempDir, runAgentd, startTestDaemon } from '../support/daemon.js';

/** A group from /etc/group other than our own primary group, so the chown is visible. */
function otherGroup(): { name: string; gid: number } {
  const mine = process.getgid?.() ?? 0;
  const groups = readFileSync('/etc/group', 'utf8')
    .split('\n')
    .map((l) => l.split(':'))
    .filter((f) => f.length >= 3 && /^\d+$/.test(f[2] ?? ''))
    .map((f) => ({ name: f[0] as string, gid: Number(f[2]) }));
  // Unprivileged, we may only give the socket to a group we are in.
  const allowed =
    process.getuid?.() === 0 ? groups : groups.filter((g) => process.getgroups?.().includes(g.gid));
  const pick = allowed.find((g) => g.gid !== mine) ?? allowed[0];
  if (!pick) throw new Error('no usable group in /etc/group');
  return pick;
}

/**
 * Base flags for a daemon run that is expected to fail before it serves, with an empty config
 * file of its own (not /dev/null, which need not be a device).
 */
async function flagsIn(dir: string, socket: string): Promise<string[]> {
  const config = path.join(dir, 'agentd-config.yaml');
  await writeFile(config, '');
  return [...simDaemonFlags(dir, socket), '--log-format', 'json', '--config', config];
}

describe('socket permissions', () => {
  it('is created with mode 0660 by default, and a second daemon on it is refused', async () => {
    const d = await startTestDaemon();
    const st = await stat(d.socket);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o660);

    // A second daemon on the same socket (with its own PID file) refuses, naming the socket.
    const dir2 = await makeTempDir();
    const second = await runAgentd(await flagsIn(dir2, d.socket));
    expect(second.timedOut).toBe(false);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(d.socket);
    // …and the first one keeps serving on it.
    expect((await d.http('GET', '/healthz')).status).toBe(200);
    expect((await stat(d.socket)).isSocket()).toBe(true);
    expect(d.proc.exitCode).toBeNull();
  });

  it('--socket-mode 0600 and --socket-group NAME are honoured', async () => {
    const group = otherGroup();
    const d = await startTestDaemon({ args: ['--socket-mode', '0600', '--socket-group', group.name] });
    const st = await stat(d.socket);
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.gid).toBe(group.gid);
  });

  it('--socket-group GID is honoured', async () => {
    const group = otherGroup();
    const d = await startTestDaemon({ args: ['--socket-group', String(group.gid)] });
    expect((await stat(d.socket)).gid).toBe(group.gid);
  });

  it('an unknown --socket-group is exit 2 naming the group and where it looked, and creates nothing', async () => {
    const dir = await makeTempDir();
    // The socket's directory does not exist yet: agentd would create it for the socket.
    const r = await runAgentd([
      ...(await flagsIn(dir, path.join(dir, 'run', 'a.sock'))),
      '--socket-group',
      'no-such-group-xyz',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('agentd: --socket-group: no group named "no-such-group-xyz"');
    expect(r.stderr).toMatch(/getent group no-such-group-xyz|in \/etc\/group/);
    await expect(stat(path.join(dir, 'run'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(stat(path.join(dir, 'agentd.pid'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('socket locations', () => {
  it('a socket in a missing directory whose parent is missing too is exit 2 naming the socket', async () => {
    const dir = await makeTempDir();
    const socket = path.join(dir, 'missing', 'deeper', 'agentd.sock');
    const r = await runAgentd(await flagsIn(dir, socket));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--socket ${socket}`);
    expect(r.stderr).toContain('does not exist');
  });

  it('a socket in a missing directory whose parent exists: the directory is created', async () => {
    const dir = await makeTempDir();
    const socket = path.join(dir, 'run', 'agentd.sock');
    const d = await startTestDaemon({ dir, socket });
    expect((await stat(socket)).isSocket()).toBe(true);
    expect((await d.http('GET', '/healthz')).status).toBe(200);
  });

  it('the directory created for the socket goes again: when a later start step fails, and at stop', async () => {
    const dir = await makeTempDir();
    const runDir = path.join(dir, 'run');
    const socket = path.join(runDir, 'agentd.sock');
    // The PID file is written after the socket's directory is made: under a regular file, it
    // cannot be, and the start fails there.
    await writeFile(path.join(dir, 'file'), '');
    const flags = await flagsIn(dir, socket);
    flags[flags.indexOf('--pid-file') + 1] = path.join(dir, 'file', 'agentd.pid');
    const r = await runAgentd(flags);
    expect(r.code, r.stderr).not.toBe(0);
    expect(existsSync(runDir)).toBe(false);

    const d = await startTestDaemon({ dir, socket });
    expect((await stat(socket)).isSocket()).toBe(true);
    expect(await d.stop()).toBe(0);
    expect(existsSync(runDir)).toBe(false);
  });

  it('a socket in a directory nobody may write to is exit 2 with a clear message', async () => {
    // A chmod 0555 directory does not stop root, and these tests often run as root; /proc
    // refuses new files for everyone, root included, so it is the reliable read-only place.
    const dir = await makeTempDir();
    const socket = '/proc/agentd-test.sock';
    const r = await runAgentd(await flagsIn(dir, socket));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--socket ${socket}`);
    expect(r.stderr).toMatch(/cannot create the socket|not writable/);
    // Nothing of ours was left behind.
    await expect(stat(path.join(dir, 'agentd.pid'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a path longer than a unix socket takes is exit 2 naming --socket, its length and the limit, and creates nothing', async () => {
    const dir = await makeTempDir();
    const socket = path.join(dir, 'run', `${'s'.repeat(120)}.sock`);
    const r = await runAgentd(await flagsIn(dir, socket));
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toBe(
      `agentd: invalid --socket: the path ${socket} is ${Buffer.byteLength(socket)} bytes long, expected at most 107 (the limit of a unix socket path, 108 bytes with its final NUL); choose a shorter path\n`,
    );
    await expect(stat(path.join(dir, 'run'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(stat(path.join(dir, 'agentd.pid'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a path that exists and is not a socket is refused and kept', async () => {
    const dir = await makeTempDir();
    const socket = path.join(dir, 'not-a-socket');
    await mkdir(socket);
    const r = await runAgentd(await flagsIn(dir, socket));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('not a socket');
    expect((await stat(socket)).isDirectory()).toBe(true);
  });

  it('a leftover socket of a dead process is removed and the daemon starts', async () => {
    const dir = await makeTempDir();
    const socket = path.join(dir, 'agentd.sock');
    // A child binds the socket and is SIGKILLed: nothing unlinks it, nobody listens on it.
    const child = spawn(
      process.execPath,
      [
        '-e',
        `require('net').createServer().listen(${JSON.stringify(socket)}, () => process.stdout.write('up'))`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('close', r));
    expect((await stat(socket)).isSocket()).toBe(true);

    const d = await startTestDaemon({ dir, socket });
    expect((await d.http('GET', '/readyz')).status).toBe(200);
    expect(d.logs()).not.toContain('failed to start');
  });
});
