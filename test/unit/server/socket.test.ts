import { spawn } from 'node:child_process';
import { lstat, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentError } from '../../../src/errors.js';
import {
  listenUnix,
  prepareSocketPath,
  removeOwnSocket,
  resolveGroup,
  socketIdentity,
} from '../../../src/server/socket.js';

let dir: string;
const servers: net.Server[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-sock-'));
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  await rm(dir, { recursive: true, force: true });
});

async function rejectsWith(p: Promise<unknown>, code: string): Promise<AgentError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AgentError);
  expect((err as AgentError).code).toBe(code);
  return err as AgentError;
}

function listen(socketPath: string): Promise<net.Server> {
  const server = net.createServer((c) => c.destroy());
  servers.push(server);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve(server));
  });
}

/** A stand-in getent: prints `line` and exits with `code`. */
async function fakeGetent(line: string, code: number): Promise<string> {
  const file = path.join(dir, `getent-${code}`);
  await writeFile(file, `#!/bin/sh\n[ "$1" = group ] || exit 9\nprintf '%s\\n' '${line}'\nexit ${code}\n`, {
    mode: 0o755,
  });
  return file;
}

describe('resolveGroup', () => {
  it('takes a numeric GID as is, as a number or as digits', async () => {
    expect(await resolveGroup(0)).toBe(0);
    expect(await resolveGroup('1234')).toBe(1234);
  });

  it('looks a name up through getent (NSS: directory services too), not only /etc/group', async () => {
    const groups = path.join(dir, 'group');
    await writeFile(groups, 'root:x:0:\n');
    const getent = await fakeGetent('ldap-ops:*:70001:alice', 0);
    expect(await resolveGroup('ldap-ops', { getent, groupFile: groups })).toBe(70001);
  });

  it('a name getent does not know is INVALID_CONFIG saying where it looked', async () => {
    const getent = await fakeGetent('', 2);
    const err = await rejectsWith(resolveGroup('nosuch', { getent }), 'INVALID_CONFIG');
    expect(err.message).toContain('--socket-group: no group named "nosuch"');
    expect(err.message).toContain('getent group nosuch');
    expect(err.message).toContain('/etc/nsswitch.conf');
  });

  it('without getent, looks a name up in the group file', async () => {
    const groups = path.join(dir, 'group');
    await writeFile(groups, 'root:x:0:\nagentd:x:987:alice,bob\nagentd-ops:x:988:\n');
    expect(await resolveGroup('agentd', { getent: null, groupFile: groups })).toBe(987);
    expect(await resolveGroup('agentd-ops', { getent: path.join(dir, 'no-getent'), groupFile: groups })).toBe(
      988,
    );
  });

  it('an unknown name is INVALID_CONFIG naming the group and the file', async () => {
    const groups = path.join(dir, 'group');
    await writeFile(groups, 'root:x:0:\n');
    const err = await rejectsWith(
      resolveGroup('nosuch', { getent: null, groupFile: groups }),
      'INVALID_CONFIG',
    );
    expect(err.message).toContain('--socket-group');
    expect(err.message).toContain('"nosuch"');
    expect(err.message).toContain(groups);
    // getent was asked for and could not run: the message says no directory service was asked.
    const missing = path.join(dir, 'no-getent');
    const err2 = await rejectsWith(
      resolveGroup('nosuch', { getent: missing, groupFile: groups }),
      'INVALID_CONFIG',
    );
    expect(err2.message).toContain(`in ${groups} (getent could not be run`);
  });

  it('an unreadable group file is the same clear error', async () => {
    const err = await rejectsWith(
      resolveGroup('x', { getent: null, groupFile: path.join(dir, 'missing') }),
      'INVALID_CONFIG',
    );
    expect(err.message).toContain('--socket-group');
  });
});

describe('prepareSocketPath', () => {
  it('does nothing when the directory exists and the path is free', async () => {
    await prepareSocketPath(path.join(dir, 'a.sock'));
  });

  it('creates the socket directory when its parent exists', async () => {
    const sock = path.join(dir, 'run', 'a.sock');
    await prepareSocketPath(sock);
    expect((await stat(path.join(dir, 'run'))).isDirectory()).toBe(true);
  });

  it('refuses a socket whose directory and parent are both missing, naming the socket', async () => {
    const sock = path.join(dir, 'x', 'y', 'a.sock');
    const err = await rejectsWith(prepareSocketPath(sock), 'INVALID_CONFIG');
    expect(err.message).toContain(`--socket ${sock}`);
    expect(err.message).toContain(path.join(dir, 'x'));
  });

  it('refuses to remove a path that is not a socket', async () => {
    const sock = path.join(dir, 'file.sock');
    await writeFile(sock, 'precious');
    const err = await rejectsWith(prepareSocketPath(sock), 'INVALID_CONFIG');
    expect(err.message).toContain('not a socket');
    expect((await stat(sock)).isFile()).toBe(true);
  });

  it('refuses a socket another process listens on, and leaves it alone', async () => {
    const sock = path.join(dir, 'live.sock');
    await listen(sock);
    const err = await rejectsWith(prepareSocketPath(sock), 'PRECONDITION_FAILED');
    expect(err.message).toContain(sock);
    expect((await stat(sock)).isSocket()).toBe(true);
  });

  it('removes a dead socket nobody listens on', async () => {
    const sock = path.join(dir, 'dead.sock');
    await createDeadSocket(sock);
    expect((await stat(sock)).isSocket()).toBe(true);
    await prepareSocketPath(sock);
    await expect(stat(sock)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

/** Leave a socket file with no listener: bind in a child and SIGKILL it (nothing can unlink). */
async function createDeadSocket(sock: string): Promise<void> {
  const child = spawn(
    process.execPath,
    ['-e', `require('net').createServer().listen(${JSON.stringify(sock)}, () => process.stdout.write('up'))`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  child.kill('SIGKILL');
  await new Promise((r) => child.once('close', r));
}

describe('listenUnix', () => {
  it.each([0o660, 0o600, 0o666])('creates the socket with mode %o', async (mode) => {
    const sock = path.join(dir, 'm.sock');
    const server = http.createServer((_req, res) => res.end('ok'));
    servers.push(server);
    await listenUnix(server, sock, mode, null);
    expect((await stat(sock)).mode & 0o777).toBe(mode);
    // The process umask is restored afterwards.
    const probe = path.join(dir, 'after');
    await writeFile(probe, '');
    expect((await stat(probe)).mode & 0o777).toBe(0o666 & ~process.umask());
  });

  it('chowns the socket to the group', async () => {
    const sock = path.join(dir, 'g.sock');
    const server = http.createServer();
    servers.push(server);
    const gid = process.getgid?.() ?? 0;
    await listenUnix(server, sock, 0o660, gid);
    expect((await stat(sock)).gid).toBe(gid);
  });

  it('a socket it cannot create is INVALID_CONFIG naming the socket', async () => {
    // /proc refuses new files even for root, unlike a chmod 0555 directory.
    const sock = '/proc/agentd-test.sock';
    const server = http.createServer();
    const err = await rejectsWith(listenUnix(server, sock, 0o660, null), 'INVALID_CONFIG');
    expect(err.message).toContain(`--socket ${sock}`);
  });

  it('a socket it cannot give to the group stops listening and is removed', async () => {
    const sock = path.join(dir, 'bad-group.sock');
    const server = http.createServer();
    servers.push(server);
    // Out of chown's range for every user, root included.
    const err = await rejectsWith(listenUnix(server, sock, 0o660, 2 ** 32), 'INVALID_CONFIG');
    expect(err.message).toContain(`cannot give ${sock} to group`);
    // Nothing keeps the process running, and nothing is left behind.
    expect(server.listening).toBe(false);
    await expect(lstat(sock)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('an address in use is a plain error (prepareSocketPath refuses it earlier)', async () => {
    const sock = path.join(dir, 'busy.sock');
    await listen(sock);
    const server = http.createServer();
    await expect(listenUnix(server, sock, 0o660, null)).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});

describe('socket directory permissions', () => {
  it('the created runtime directory is 0755', async () => {
    await mkdir(path.join(dir, 'parent'));
    await prepareSocketPath(path.join(dir, 'parent', 'run', 'a.sock'));
    expect((await stat(path.join(dir, 'parent', 'run'))).mode & 0o777).toBe(0o755 & ~process.umask());
  });
});

describe('removeOwnSocket', () => {
  it('removes the socket this process bound, never one bound in its place later', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-own-sock-'));
    const sock = path.join(dir, 's.sock');
    const listen = async (): Promise<net.Server> => {
      const server = net.createServer();
      await new Promise<void>((resolve) => server.listen(sock, resolve));
      return server;
    };
    const mine = await listen();
    const own = await socketIdentity(sock);
    // Someone else removed it and bound their own at the same path.
    await new Promise<void>((resolve) => mine.close(() => resolve()));
    const theirs = await listen();
    expect(await removeOwnSocket(sock, own)).toBe(false);
    expect((await lstat(sock)).isSocket()).toBe(true);
    const theirsId = await socketIdentity(sock);
    expect(await removeOwnSocket(sock, theirsId)).toBe(true);
    await expect(lstat(sock)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await removeOwnSocket(sock, theirsId)).toBe(false);
    await new Promise<void>((resolve) => theirs.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });
});
