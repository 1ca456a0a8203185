/**
 * Registry configuration an operator put into the serving machine survives a repave: the
 * new machine gets a copy of the serving machine's `/etc/containerd/certs.d` (mirrors,
 * credentials, CAs per registry) and of its `/etc/containerd/conf.d` drop-ins, except the
 * ones agentd writes itself (docs/operations.md, "Registry mirrors and containerd drop-ins").
 * Copied after the image is applied, so the operator's files win over the image's.
 */
import { lstat, readFile, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import { PreconditionFailedError, errorCode, toAgentError } from '../../errors.js';
import { resolvePathInRootfs, writeRootfsFile, writeRootfsSymlink } from './rootfs-path.js';

/** The rootfs directories carried from the serving machine to the new one. */
export const CARRIED_DIRS = Object.freeze(['etc/containerd/certs.d', 'etc/containerd/conf.d']);

/** Files agentd owns inside the carried directories: rewritten (or removed) by agentd, never carried. */
export const AGENTD_OWNED_DROP_INS = Object.freeze(['etc/containerd/conf.d/99-nvidia-runtime.toml']);

/** What one carry copied, for the log. */
export interface CarryResult {
  /** Paths relative to the rootfs, in copy order. */
  readonly copied: readonly string[];
}

async function walk(dir: string, rel: string, out: string[]): Promise<void> {
  const entries = await readdir(dir);
  for (const name of entries.sort()) {
    const childRel = path.posix.join(rel, name);
    const child = path.join(dir, name);
    const st = await lstat(child);
    if (st.isDirectory()) await walk(child, childRel, out);
    else if (st.isFile() || st.isSymbolicLink()) out.push(childRel);
    // Sockets, FIFOs and device nodes are no registry configuration: left behind.
  }
}

/**
 * Copy the carried directories from `sourceRootfs` into `targetRootfs`: regular files with
 * their mode, symlinks as they are (they resolve inside the machine that reads them). A
 * source without them carries nothing.
 */
export async function carryRegistryConfig(sourceRootfs: string, targetRootfs: string): Promise<CarryResult> {
  const copied: string[] = [];
  for (const rel of CARRIED_DIRS) {
    let dir: string;
    try {
      dir = await resolvePathInRootfs(sourceRootfs, rel);
      if (!(await lstat(dir)).isDirectory()) continue;
    } catch (err) {
      // Absent, or a file where a directory was expected: nothing to carry from there.
      if (errorCode(err) === 'ENOENT' || err instanceof PreconditionFailedError) continue;
      throw toAgentError(err, `read ${rel} of ${sourceRootfs}`);
    }
    const files: string[] = [];
    try {
      await walk(dir, rel, files);
    } catch (err) {
      throw toAgentError(err, `read ${rel} of ${sourceRootfs}`);
    }
    for (const file of files) {
      if (AGENTD_OWNED_DROP_INS.includes(file)) continue;
      const from = path.join(dir, path.posix.relative(rel, file));
      const st = await lstat(from);
      if (st.isSymbolicLink()) {
        await writeRootfsSymlink(targetRootfs, file, await readlink(from));
      } else {
        await writeRootfsFile(targetRootfs, file, await readFile(from), st.mode & 0o7777);
      }
      copied.push(file);
    }
  }
  return Object.freeze({ copied: Object.freeze(copied) });
}
