/**
 * Applies tar entries to a target directory without ever writing outside it. Every entry first
 * passes the archive entry policy (`EntryPolicy` in src/provision/tar: names, types, links,
 * whiteouts); on disk, in addition:
 * - every parent component is checked with `lstat` and must be a real directory: a symlinked
 *   parent is REJECTED, whether the image shipped it or an earlier layer planted it, so nothing
 *   is ever written through a symlink (real layers record real paths, so they never need to);
 * - files are created with `O_CREAT|O_EXCL|O_NOFOLLOW` after removing what was there, so an
 *   existing link is replaced, never written through;
 * - hardlinks must point at an existing non-directory inside the tree;
 * - OCI whiteouts (`.wh.<name>`, `.wh..wh..opq`) only remove what lower layers left.
 * The checks rely on this writer being the only one changing the tree while it runs.
 *
 * Per-entry filesystem calls are synchronous on purpose: an entry is a handful of fast syscalls,
 * and a thread-pool round trip for each made extraction 2.5x slower (20k small files: 5.2 s vs
 * 2.0 s). The event loop is still released between input chunks; file bodies above 1 MiB and
 * recursive removals go through the thread pool.
 */
import fs, { constants } from 'node:fs';
import type { Stats } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { UnsafeArchiveError } from '../../../errors.js';
import { writeAll, writeAllSync } from '../write-all.js';
import { joinRel, parentOf } from '../../tar/entry-path.js';
import { EntryPolicy } from '../../tar/entry-policy.js';
import type { EntryAction } from '../../tar/entry-policy.js';
import type { TarEntry } from '../../tar/tar-reader.js';

/** What a layer did to the tree. */
export interface ApplyStats {
  /** Archive entries read (metadata headers not counted). */
  entries: number;
  files: number;
  directories: number;
  symlinks: number;
  hardlinks: number;
  whiteouts: number;
  /** File content bytes written. */
  bytes: number;
}

export interface LayerWriterOptions {
  /** chown entries to their uid/gid (only possible as root). */
  preserveOwnership: boolean;
  /** Running as root: directory modes are kept exactly; otherwise the owner keeps rwx so later layers can write. */
  isRoot: boolean;
}

interface DirMeta {
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
}

const CREATE_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
const OPEN_DIR = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const WRITE_BATCH_BYTES = 1024 * 1024;

type WhiteoutAction = Extract<EntryAction, { kind: 'whiteout' | 'opaque' | 'none' }>;

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

function lstatOrUndefined(abs: string): Stats | undefined {
  return fs.lstatSync(abs, { throwIfNoEntry: false });
}

export class LayerWriter {
  readonly stats: ApplyStats = {
    entries: 0,
    files: 0,
    directories: 0,
    symlinks: 0,
    hardlinks: 0,
    whiteouts: 0,
    bytes: 0,
  };
  readonly #root: string;
  readonly #options: LayerWriterOptions;
  readonly #policy = new EntryPolicy({ layer: true });
  /** Paths this layer wrote: whiteouts and opaque markers must not remove them. */
  readonly #created = new Set<string>();
  /** Paths verified to be real directories (a cache of the lstat walk; '' is the root). */
  readonly #knownDirs = new Set<string>(['']);
  /** Directory metadata, applied at the end so adding children does not undo the mtimes. */
  readonly #dirMeta = new Map<string, DirMeta>();

  /** `root` must be the real path (no symlinks) of an existing directory. */
  constructor(root: string, options: LayerWriterOptions) {
    this.#root = root;
    this.#options = options;
  }

  /** Apply one entry (reading its body). Throws UNSAFE_ARCHIVE for anything not allowed. */
  async apply(entry: TarEntry): Promise<void> {
    this.stats.entries++;
    const action = this.#policy.check(entry);
    switch (action.kind) {
      case 'whiteout':
      case 'opaque':
      case 'none':
        return this.#whiteout(action, entry.path);
    }
    const { rel } = action;
    // `./` heads many archives; the target root's own mode and owner stay the caller's
    if (rel === '') return;
    await this.#ensureDir(parentOf(rel), entry.path, true);
    const abs = path.join(this.#root, rel);
    switch (action.kind) {
      case 'directory':
        await this.#directory(entry, rel, abs);
        break;
      case 'file':
        await this.#file(entry, rel, abs);
        break;
      case 'symlink':
        await this.#symlink(entry, rel, abs);
        break;
      case 'hardlink':
        await this.#hardlink(entry, rel, abs, action.targetRel);
        break;
    }
    this.#created.add(rel);
  }

  /** Apply the directories' modes, owners and mtimes; call once after the last entry. */
  async finish(): Promise<void> {
    for (const [rel, meta] of this.#dirMeta) {
      if (!(await this.#ensureDir(parentOf(rel), rel, false))) continue;
      let fd: number;
      try {
        fd = fs.openSync(path.join(this.#root, rel), OPEN_DIR);
      } catch (err) {
        if (['ENOENT', 'ELOOP', 'ENOTDIR'].includes(errno(err) ?? '')) continue; // replaced later in the layer
        throw err;
      }
      try {
        if (this.#options.preserveOwnership) fs.fchownSync(fd, meta.uid, meta.gid);
        fs.fchmodSync(fd, this.#options.isRoot ? meta.mode : meta.mode | 0o700);
        fs.futimesSync(fd, meta.mtime, meta.mtime);
      } finally {
        fs.closeSync(fd);
      }
    }
  }

  /**
   * Make sure `rel` is a real directory, checking each component with lstat (a symlink or a
   * non-directory is UNSAFE_ARCHIVE). Missing components are created when `create`, else the
   * result is false.
   */
  async #ensureDir(rel: string, entryName: string, create: boolean): Promise<boolean> {
    if (this.#knownDirs.has(rel)) return true;
    let cur = '';
    for (const part of rel.split('/')) {
      cur = joinRel(cur, part);
      if (this.#knownDirs.has(cur)) continue;
      const abs = path.join(this.#root, cur);
      const st = lstatOrUndefined(abs);
      if (st === undefined) {
        if (!create) return false;
        fs.mkdirSync(abs, { mode: 0o755 });
        this.#created.add(cur);
      } else if (st.isSymbolicLink()) {
        throw new UnsafeArchiveError(
          entryName,
          `parent ${JSON.stringify(cur)} is a symlink; writing through symlinks is refused`,
        );
      } else if (!st.isDirectory()) {
        throw new UnsafeArchiveError(entryName, `parent ${JSON.stringify(cur)} is not a directory`);
      }
      this.#knownDirs.add(cur);
    }
    return true;
  }

  /** Remove whatever is at `rel` (a directory with its contents; symlinks are not followed). */
  async #clear(rel: string): Promise<void> {
    const abs = path.join(this.#root, rel);
    const st = lstatOrUndefined(abs);
    if (!st) return;
    if (st.isDirectory()) {
      await rm(abs, { recursive: true, force: true });
      this.#forget(rel);
    } else {
      fs.unlinkSync(abs);
    }
  }

  /** Drop cached facts about `rel` and everything under it (it was removed or replaced). */
  #forget(rel: string): void {
    const prefix = `${rel}/`;
    for (const dir of this.#knownDirs) if (dir === rel || dir.startsWith(prefix)) this.#knownDirs.delete(dir);
    for (const dir of this.#dirMeta.keys())
      if (dir === rel || dir.startsWith(prefix)) this.#dirMeta.delete(dir);
  }

  /** Run `make` (which creates `rel` exclusively); when something is in the way, remove it and retry once. */
  async #createReplacing<T>(rel: string, make: () => T): Promise<T> {
    try {
      return make();
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw err;
    }
    await this.#clear(rel);
    return make();
  }

  async #directory(entry: TarEntry, rel: string, abs: string): Promise<void> {
    try {
      fs.mkdirSync(abs, { mode: 0o700 });
    } catch (err) {
      if (errno(err) !== 'EEXIST') throw err;
      // a duplicate directory entry merges; anything else in the way is replaced
      if (!fs.lstatSync(abs).isDirectory()) {
        fs.unlinkSync(abs);
        fs.mkdirSync(abs, { mode: 0o700 });
      }
    }
    this.#knownDirs.add(rel);
    this.#dirMeta.set(rel, { mode: entry.mode & 0o7777, uid: entry.uid, gid: entry.gid, mtime: entry.mtime });
    this.stats.directories++;
  }

  async #file(entry: TarEntry, rel: string, abs: string): Promise<void> {
    const fd = await this.#createReplacing(rel, () => fs.openSync(abs, CREATE_FILE, 0o600));
    try {
      let batch: Buffer[] = [];
      let batchBytes = 0;
      for await (const chunk of entry.body) {
        batch.push(chunk);
        batchBytes += chunk.length;
        if (batchBytes >= WRITE_BATCH_BYTES) {
          await writeAll(fd, batch, abs);
          this.stats.bytes += batchBytes;
          batch = [];
          batchBytes = 0;
        }
      }
      writeAllSync(fd, batch, abs);
      this.stats.bytes += batchBytes;
      // owner before mode: chown clears setuid/setgid bits
      if (this.#options.preserveOwnership) fs.fchownSync(fd, entry.uid, entry.gid);
      fs.fchmodSync(fd, entry.mode & 0o7777);
      fs.futimesSync(fd, entry.mtime, entry.mtime);
    } finally {
      fs.closeSync(fd);
    }
    this.stats.files++;
  }

  async #symlink(entry: TarEntry, rel: string, abs: string): Promise<void> {
    // The link itself may point anywhere (absolute targets are normal in a rootfs): it is never followed here.
    await this.#createReplacing(rel, () => fs.symlinkSync(entry.linkname, abs));
    if (this.#options.preserveOwnership) fs.lchownSync(abs, entry.uid, entry.gid);
    fs.lutimesSync(abs, entry.mtime, entry.mtime);
    this.stats.symlinks++;
  }

  async #hardlink(entry: TarEntry, rel: string, abs: string, targetRel: string): Promise<void> {
    const missing = new UnsafeArchiveError(
      entry.path,
      `hardlink target ${JSON.stringify(entry.linkname)} does not exist in the tree`,
    );
    if (!(await this.#ensureDir(parentOf(targetRel), entry.path, false))) throw missing;
    const targetAbs = path.join(this.#root, targetRel);
    const st = lstatOrUndefined(targetAbs);
    if (!st) throw missing;
    if (st.isDirectory())
      throw new UnsafeArchiveError(
        entry.path,
        `hardlink target ${JSON.stringify(entry.linkname)} is a directory`,
      );
    if (targetRel !== rel) await this.#createReplacing(rel, () => fs.linkSync(targetAbs, abs));
    this.stats.hardlinks++;
  }

  async #whiteout(action: WhiteoutAction, entryName: string): Promise<void> {
    this.stats.whiteouts++;
    if (action.kind === 'none') return; // other AUFS metadata (hardlink dirs): nothing to apply
    if (action.kind === 'opaque') {
      if (await this.#ensureDir(action.dir, entryName, false)) await this.#emptyExceptCreated(action.dir);
      return;
    }
    if (!(await this.#ensureDir(parentOf(action.victim), entryName, false))) return;
    // a whiteout hides lower layers only, never what this layer itself wrote
    if (!this.#created.has(action.victim)) await this.#clear(action.victim);
  }

  /** The opaque-directory rule: remove what lower layers left in `dir`, keep this layer's entries. */
  async #emptyExceptCreated(dir: string): Promise<void> {
    for (const name of await readdir(path.join(this.#root, dir))) {
      const child = joinRel(dir, name);
      if (!this.#created.has(child)) await this.#clear(child);
      else if (this.#knownDirs.has(child)) await this.#emptyExceptCreated(child);
    }
  }
}
