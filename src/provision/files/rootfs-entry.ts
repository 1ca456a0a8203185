/** One file or symlink agentd writes into a machine rootfs, with its content. */
import { writeRootfsFile, writeRootfsSymlink } from './rootfs-path.js';

/** A regular file to write. */
export interface RootfsFile {
  readonly kind: 'file';
  /** Path relative to the rootfs, e.g. `etc/hostname`. */
  readonly path: string;
  readonly mode: number;
  readonly content: string;
  /** The content holds a credential (bootstrap token, exec env): never log or show it. */
  readonly secret: boolean;
}

/** A symlink to create (replacing whatever is there). */
export interface RootfsSymlink {
  readonly kind: 'symlink';
  readonly path: string;
  readonly target: string;
}

export type RootfsEntry = RootfsFile | RootfsSymlink;

/** Write (or link) each entry into the rootfs, in order. */
export async function writeRootfsEntries(rootfs: string, entries: readonly RootfsEntry[]): Promise<void> {
  // Sequential on purpose: entries share directories, and a failure should stop at the first one.
  for (const entry of entries) {
    if (entry.kind === 'symlink') await writeRootfsSymlink(rootfs, entry.path, entry.target);
    else await writeRootfsFile(rootfs, entry.path, entry.content, entry.mode);
  }
}
