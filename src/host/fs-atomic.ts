/**
 * Atomic file writes: the bytes go to a temp file in the same directory, are fsynced, then
 * renamed over the target, so a crash leaves either the old file or the new one, never half;
 * then the directory is fsynced, so the rename itself survives a power loss (without it, the
 * journal could come back as its previous version after a power cut).
 */
import { mkdir, open, stat } from 'node:fs/promises';
import path from 'node:path';
import writeFileAtomicCb from 'write-file-atomic';
import { noSpaceOr } from '../errors.js';

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
  await mkdir(path.dirname(file), { recursive: true, mode: options.dirMode ?? 0o755 });
  try {
    await writeFileAtomicCb(file, typeof data === 'string' ? data : Buffer.from(data), {
      mode: options.mode ?? 0o644,
      fsync: true,
    });
    await fsyncDir(path.dirname(file));
  } catch (err) {
    throw noSpaceOr(err, `write ${file}`);
  }
}

/** Flush a directory's entries (a rename, a new file) to disk. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Whether `p` exists (anything stat can see; a dangling link does not). */
export async function pathExists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}
