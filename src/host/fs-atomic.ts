/**
 * Atomic file writes: the bytes go to a temp file in the same directory, are fsynced, then
 * renamed over the target, so a crash leaves either the old file or the new one, never half.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import writeFileAtomicCb from 'write-file-atomic';
import { noSpaceOr } from '../errors.js';

export interface AtomicWriteOptions {
  /** File mode (default 0o644). */
  mode?: number;
  /** Create missing parent directories with this mode (default 0o755). */
  dirMode?: number;
}

/** Write `data` to `file` atomically (fsync + rename), creating parent directories. */
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
  } catch (err) {
    throw noSpaceOr(err, `write ${file}`);
  }
}
