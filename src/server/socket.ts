/**
 * The admin socket: created with its final mode from the first instant (umask during bind),
 * chowned to `--socket-group`, and never stolen from a live daemon — a leftover file is
 * removed only after a connection attempt proves nobody listens.
 */
import { execFile } from 'node:child_process';
import { access, chmod, chown, lstat, mkdir, readFile, rm } from 'node:fs/promises';
import { constants, lstatSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { InvalidConfigError, PreconditionFailedError } from '../errors.js';
import { pathExists as exists } from '../host/fs-atomic.js';

/** Where `resolveGroup` looks a group name up (tests point it elsewhere). */
export interface GroupLookup {
  /** The getent program, which asks NSS (/etc/nsswitch.conf); null: only `groupFile`. */
  getent?: string | null;
  /** Read when getent is not installed. */
  groupFile?: string;
}

/** `getent group NAME`: the GID, null when there is no such group, undefined when getent could not answer. */
function getentGroup(getent: string, name: string): Promise<number | null | undefined> {
  return new Promise((resolve) => {
    execFile(getent, ['group', name], { timeout: 10_000 }, (err, stdout) => {
      // Exit 2: no such group (getent(1)).
      if (err) return resolve((err as { code?: unknown }).code === 2 ? null : undefined);
      const gid = stdout.split('\n')[0]?.split(':')[2];
      resolve(gid !== undefined && /^\d+$/.test(gid) ? Number(gid) : undefined);
    });
  });
}

/**
 * Resolve `--socket-group`: a numeric GID, or a name looked up as the C library would, through
 * NSS (`getent group`: /etc/group, and LDAP, sssd or systemd-userdb when /etc/nsswitch.conf
 * names them); in /etc/group alone where getent is not installed. The host's groups, never
 * those under `--root`: the socket is the host's.
 */
export async function resolveGroup(group: string | number, lookup: GroupLookup = {}): Promise<number> {
  if (typeof group === 'number' || /^\d+$/.test(group)) return Number(group);
  const getent = lookup.getent === undefined ? 'getent' : lookup.getent;
  const groupFile = lookup.groupFile ?? '/etc/group';
  if (getent !== null) {
    const gid = await getentGroup(getent, group);
    if (gid === null) {
      throw new InvalidConfigError(
        `--socket-group: no group named ${JSON.stringify(group)}: \`getent group ${group}\` found none (it asks /etc/group and the directory services /etc/nsswitch.conf names); create it with groupadd --system ${group}, or give a GID`,
      );
    }
    if (gid !== undefined) return gid;
  }
  const text = await readFile(groupFile, 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === group && gid !== undefined) return Number(gid);
  }
  throw new InvalidConfigError(
    `--socket-group: no group named ${JSON.stringify(group)} in ${groupFile}${getent === null ? '' : ' (getent could not be run, so no directory service was asked)'}; create it with groupadd --system ${group}, or give a GID`,
  );
}

function probe(socketPath: string, timeoutMs: number): Promise<'listening' | 'dead'> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(socketPath);
    const timer = setTimeout(() => {
      sock.destroy();
      // Something accepted the path but does not answer: treat it as alive, never steal it.
      resolve('listening');
    }, timeoutMs);
    sock.once('connect', () => {
      clearTimeout(timer);
      sock.destroy();
      resolve('listening');
    });
    sock.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (err.code === 'ECONNREFUSED' || err.code === 'ENOENT') resolve('dead');
      else reject(err);
    });
  });
}

/**
 * Make `socketPath` ready to bind: create the runtime directory when its parent exists (it is
 * ours to create), refuse when another daemon listens, remove a dead leftover socket. Resolves
 * to the directory it created (for the daemon to remove again when it stops or fails), or null.
 */
export async function prepareSocketPath(socketPath: string): Promise<string | null> {
  const dir = path.dirname(socketPath);
  let created: string | null = null;
  if (!(await exists(dir))) {
    if (!(await exists(path.dirname(dir)))) {
      throw new InvalidConfigError(
        `--socket ${socketPath}: directory ${dir} does not exist, and neither does its parent ${path.dirname(dir)}`,
      );
    }
    try {
      await mkdir(dir, { mode: 0o755 });
      created = dir;
    } catch (err) {
      throw new InvalidConfigError(
        `--socket ${socketPath}: cannot create directory ${dir}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
  }
  try {
    await access(dir, constants.W_OK);
  } catch (err) {
    throw new InvalidConfigError(
      `--socket ${socketPath}: directory ${dir} is not writable: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  let st;
  try {
    st = await lstat(socketPath);
  } catch {
    return created;
  }
  if (!st.isSocket()) {
    throw new InvalidConfigError(
      `--socket ${socketPath}: the path exists and is not a socket; refusing to remove it`,
    );
  }
  if ((await probe(socketPath, 1000)) === 'listening') {
    throw new PreconditionFailedError(
      `another process (probably agentd) is listening on ${socketPath}; stop it first (agentctl stop) or use another --socket`,
    );
  }
  await rm(socketPath, { force: true });
  return created;
}

/** Listen on the unix socket with `mode` in force at bind time, then chown to the group. */
export async function listenUnix(
  server: Server,
  socketPath: string,
  mode: number,
  gid: number | null,
): Promise<void> {
  // The umask applies to the bind(2) inside listen(), which happens synchronously here, so the
  // socket never exists with wider permissions than `mode`.
  const previous = process.umask(0o777 & ~mode);
  const listening = new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      reject(
        err.code === 'EACCES' || err.code === 'EROFS' || err.code === 'EPERM'
          ? new InvalidConfigError(`--socket ${socketPath}: cannot create the socket: ${err.message}`, {
              cause: err,
            })
          : err,
      );
    };
    server.once('error', onError);
    server.once('listening', () => {
      server.off('error', onError);
      resolve();
    });
  });
  try {
    server.listen(socketPath);
  } finally {
    process.umask(previous);
  }
  await listening;
  try {
    await chmod(socketPath, mode);
    if (gid !== null) {
      try {
        await chown(socketPath, -1, gid);
      } catch (err) {
        throw new InvalidConfigError(
          `--socket-group: cannot give ${socketPath} to group ${gid}: ${(err as Error).message}`,
          {
            cause: err,
          },
        );
      }
    }
  } catch (err) {
    // The caller takes the server down only once this resolved: a socket that failed here
    // must not keep listening (and the process running) nor stay behind.
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(socketPath, { force: true });
    throw err;
  }
}

/**
 * Which file a socket path is: device, inode and change time in nanoseconds — the inode alone
 * is reused at once by a socket bound at the same path after ours was removed.
 */
export interface SocketIdentity {
  dev: bigint;
  ino: bigint;
  ctimeNs: bigint;
}

/** The identity of the socket at `socketPath`, taken right after this process bound it. */
export async function socketIdentity(socketPath: string): Promise<SocketIdentity> {
  const st = await lstat(socketPath, { bigint: true });
  return { dev: st.dev, ino: st.ino, ctimeNs: st.ctimeNs };
}

/**
 * Remove the socket this process bound, and only that one: a path that is gone, or that now
 * is another file (a new daemon's socket), is left alone.
 */
export async function removeOwnSocket(socketPath: string, own: SocketIdentity): Promise<boolean> {
  let st;
  try {
    st = await lstat(socketPath, { bigint: true });
  } catch {
    return false;
  }
  if (!st.isSocket() || st.dev !== own.dev || st.ino !== own.ino || st.ctimeNs !== own.ctimeNs) return false;
  await rm(socketPath, { force: true });
  return true;
}

/** `removeOwnSocket` in one synchronous step, for a process about to exit at once. */
export function removeOwnSocketSync(socketPath: string, own: SocketIdentity): boolean {
  let st;
  try {
    st = lstatSync(socketPath, { bigint: true });
  } catch {
    return false;
  }
  if (!st.isSocket() || st.dev !== own.dev || st.ino !== own.ino || st.ctimeNs !== own.ctimeNs) return false;
  rmSync(socketPath, { force: true });
  return true;
}
