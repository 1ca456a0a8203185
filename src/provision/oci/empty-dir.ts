/** Emptying the rootfs target before a pull (the upstream agent skipped non-empty ones instead). */
import { lstat, mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { PreconditionFailedError } from '../../errors.js';

/**
 * Create `dir` if missing, else remove everything in it (symlinks are removed, never followed).
 * Refuses a filesystem root and a `dir` that is itself a symlink or not a directory.
 */
export async function emptyDirectory(dir: string): Promise<void> {
  const abs = path.resolve(dir);
  if (abs === path.parse(abs).root)
    throw new PreconditionFailedError(`refusing to empty ${abs}: it is a filesystem root`);
  await mkdir(abs, { recursive: true, mode: 0o755 });
  const st = await lstat(abs);
  if (!st.isDirectory()) {
    throw new PreconditionFailedError(
      `rootfs target ${abs} is a ${st.isSymbolicLink() ? 'symlink' : 'non-directory'}; expected a directory`,
    );
  }
  for (const name of await readdir(abs)) await rm(path.join(abs, name), { recursive: true, force: true });
}
