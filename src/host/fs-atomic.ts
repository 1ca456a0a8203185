/**
 * Atomic file writes: the bytes go to a temp file in the same directory, are fsynced, then
 * renamed over the target, so a crash leaves either the old file or the new one, never half;
 * then the directory is fsynced, so the rename itself survives a power loss (without it, the
 * journal could come back as its previous version after a power cut).
 *
 * Only a regular file (or nothing) is replaced. A symbolic link in the place of the file is
 * refused, never written through: a link planted at a path a root daemon writes (its PID file,
 * its state) would otherwise let the daemon replace any file of the host with its own bytes.
 * Anything else that is not a regular file is refused too: the rename would turn a device node
 * such as `--pid-file /dev/null` into a regular file, breaking every program of the host that
 * writes to it. The check comes before the write, so a link planted in between is possible: the
 * write never resolves the path, and rename(2) replaces such a link itself, leaving its target
 * as it was (write-file-atomic, which this replaces, resolved links before writing).
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import path from 'node:path';
import {
  describeError,
  errorCode,
  isAgentError,
  noSpaceOr,
  PreconditionFailedError,
  type AgentError,
} from '../errors.js';

export interface AtomicWriteOptions {
  /** File mode (default 0o644). */
  mode?: number;
  /** Create missing parent directories with this mode (default 0o755). */
  dirMode?: number;
}

/** Write `data` to `file` atomically (fsync, rename, fsync of the directory), creating parent directories. */
export async function writeFileAtomic(
  file: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  await fsp.mkdir(path.dirname(file), { recursive: true, mode: options.dirMode ?? 0o755 });
  await refuseNonRegular(file);
  const mode = options.mode ?? 0o644;
  // In the same directory (rename(2) does not cross file systems), named after the file so that
  // a leftover says whose it was; `wx` fails rather than open anything already there.
  const temp = path.join(
    path.dirname(file),
    `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`,
  );
  try {
    const handle = await fsp.open(temp, 'wx', mode);
    try {
      await handle.writeFile(data);
      // The umask applied at open; the file gets exactly `mode`.
      await handle.chmod(mode);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fsp.rename(temp, file);
    await fsyncDir(path.dirname(file));
  } catch (err) {
    await fsp.rm(temp, { force: true }).catch(() => undefined);
    throw noSpaceOr(err, `write ${file}`);
  }
}

async function refuseNonRegular(file: string): Promise<void> {
  const st = await fsp.lstat(file).catch((err: unknown) => {
    if (errorCode(err) === 'ENOENT') return undefined;
    throw noSpaceOr(err, `write ${file}`);
  });
  if (st === undefined || st.isFile()) return;
  const what = st.isSymbolicLink()
    ? 'a symbolic link'
    : st.isDirectory()
      ? 'a directory'
      : st.isCharacterDevice() || st.isBlockDevice()
        ? 'a device'
        : st.isFIFO()
          ? 'a named pipe'
          : st.isSocket()
            ? 'a socket'
            : 'something other than a regular file';
  throw new PreconditionFailedError(
    `write ${file}: it is ${what}; agentd replaces only regular files and never writes through a link — choose another path or remove what is there`,
  );
}

/** The errno codes of a directory that cannot be written: its permissions, or a read-only file system. */
const NOT_WRITABLE = new Set(['EACCES', 'EPERM', 'EROFS']);

/**
 * A write of agentd's own state failed: an AgentError passes (NO_SPACE from `writeFileAtomic`);
 * anything else is PRECONDITION_FAILED naming the file and, when its directory cannot be
 * written, saying so, rather than a bare errno message about a temp file.
 */
export function stateWriteError(err: unknown, file: string): AgentError {
  if (isAgentError(err)) return err;
  const code = errorCode(err);
  const why =
    code !== undefined && NOT_WRITABLE.has(code)
      ? `${path.dirname(file)} is not writable (${describeError(err)})`
      : describeError(err);
  return new PreconditionFailedError(`cannot write ${file}: ${why}`, {
    cause: err,
    data: { file, ...(code !== undefined ? { errno: code } : {}) },
  });
}

/** Flush a directory's entries (a rename, a new file) to disk. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Whether `p` exists (anything stat can see; a dangling link does not). */
export async function pathExists(p: string): Promise<boolean> {
  try {
    await fsp.stat(p);
    return true;
  } catch {
    return false;
  }
}
