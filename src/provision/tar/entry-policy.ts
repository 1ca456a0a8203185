/**
 * The one entry policy for every archive agentd unpacks, image layers and artifact tarballs
 * alike (docs/architecture.md, "Archives"). An entry is refused (UNSAFE_ARCHIVE naming it) when:
 * - its name is absolute, has a `..` component, a NUL byte, or is too long (`normalizeEntryPath`);
 * - it is a device node, a fifo or an entry type agentd does not know;
 * - it would be written through a symlink the same archive declared earlier (the layer writer
 *   also refuses symlinked parents found on disk);
 * - it is a hardlink whose target is absolute, climbs out with `..`, passes through such a
 *   symlink, or (artifacts) is not an earlier file of the same archive;
 * - it is a symlink with an empty, NUL-bearing or over-long target.
 * Symlinks themselves may point anywhere (absolute targets are normal in a rootfs): nothing ever
 * follows them. OCI whiteouts (`.wh.<name>`, `.wh..wh..opq`) are understood in layers only; in an
 * artifact tarball such a name is an ordinary file.
 */
import { UnsafeArchiveError } from '../../errors.js';
import { MAX_PATH_BYTES, baseOf, joinRel, normalizeEntryPath, parentOf } from './entry-path.js';
import type { TarEntry } from './tar-reader.js';

/** The OCI opaque-directory marker. */
export const OPAQUE_MARKER = '.wh..wh..opq';
const WHITEOUT_PREFIX = '.wh.';

/** What an accepted entry asks for; `rel` is its normalized path (`''` is the target root). */
export type EntryAction =
  | { kind: 'file' | 'directory' | 'symlink'; rel: string }
  | { kind: 'hardlink'; rel: string; targetRel: string }
  /** Remove `victim` as lower layers left it (layers only). */
  | { kind: 'whiteout'; rel: string; victim: string }
  /** Remove what lower layers left in `dir` (layers only). */
  | { kind: 'opaque'; rel: string; dir: string }
  /** Nothing to do (other AUFS metadata such as `.wh..wh..plnk`). */
  | { kind: 'none'; rel: string };

export interface EntryPolicyOptions {
  /**
   * An OCI image layer: `.wh.` names are whiteouts, and hardlinks may name files of lower
   * layers (their existence is checked on disk by the writer). Otherwise a hardlink must name an
   * earlier file of the same archive.
   */
  layer: boolean;
}

/** True when `rel` is `dir` itself or below it. */
function within(rel: string, dir: string): boolean {
  return rel === dir || rel.startsWith(`${dir}/`);
}

/**
 * Checks the entries of one archive in order. It remembers which paths the archive made
 * symlinks (and, for artifacts, files), so it must see every entry, once, in archive order.
 */
export class EntryPolicy {
  readonly #layer: boolean;
  /** Symlinks declared by this archive and not replaced since. */
  readonly #symlinks = new Set<string>();
  /** Non-directory entries of this archive (hardlink targets of artifacts). */
  readonly #files = new Set<string>();
  /** Ancestors of the paths in the two sets: only replacing one of these can drop entries. */
  readonly #holders = new Set<string>();

  constructor(options: EntryPolicyOptions) {
    this.#layer = options.layer;
  }

  /** The action for `entry`, or UNSAFE_ARCHIVE naming it. */
  check(entry: TarEntry): EntryAction {
    const rel = normalizeEntryPath(entry.path);
    const base = baseOf(rel);
    if (this.#layer && base.startsWith(WHITEOUT_PREFIX)) return this.#whiteout(entry, rel, base);
    if (entry.kind === 'char-device' || entry.kind === 'block-device' || entry.kind === 'fifo') {
      throw new UnsafeArchiveError(entry.path, `${entry.kind} entries are not allowed`);
    }
    if (entry.kind === 'other') {
      throw new UnsafeArchiveError(entry.path, `unsupported entry type ${JSON.stringify(entry.typeflag)}`);
    }
    if (rel === '') {
      // `./` heads many archives; the target root's own mode and owner stay the caller's
      if (entry.kind === 'directory') return { kind: 'directory', rel };
      throw new UnsafeArchiveError(
        entry.path,
        `a ${entry.kind} entry cannot replace the target directory itself`,
      );
    }
    this.#refuseThroughSymlink(parentOf(rel), entry.path);
    let action: EntryAction;
    switch (entry.kind) {
      case 'symlink':
        this.#checkSymlinkTarget(entry);
        action = { kind: 'symlink', rel };
        break;
      case 'hardlink':
        action = { kind: 'hardlink', rel, targetRel: this.#hardlinkTarget(entry) };
        break;
      default:
        action = { kind: entry.kind, rel };
    }
    this.#record(action);
    return action;
  }

  #whiteout(entry: TarEntry, rel: string, base: string): EntryAction {
    const dir = parentOf(rel);
    this.#refuseThroughSymlink(dir, entry.path);
    if (base === OPAQUE_MARKER) return { kind: 'opaque', rel, dir };
    if (base.startsWith(`${WHITEOUT_PREFIX}${WHITEOUT_PREFIX}`)) return { kind: 'none', rel };
    const name = base.slice(WHITEOUT_PREFIX.length);
    // normalizeEntryPath already refused `..`; `.wh.` alone and `.wh..` name nothing
    if (name === '' || name === '.') throw new UnsafeArchiveError(entry.path, 'whiteout names no file');
    // A whiteout hides lower layers only, never what this layer wrote: nothing to forget here.
    return { kind: 'whiteout', rel, victim: joinRel(dir, name) };
  }

  /** Refuse when `dir` or one of its ancestors is a symlink this archive declared. */
  #refuseThroughSymlink(dir: string, entryName: string): void {
    if (this.#symlinks.size === 0 || dir === '') return;
    let cur = '';
    for (const part of dir.split('/')) {
      cur = joinRel(cur, part);
      if (this.#symlinks.has(cur)) {
        throw new UnsafeArchiveError(
          entryName,
          `parent ${JSON.stringify(cur)} is a symlink; writing through symlinks is refused`,
        );
      }
    }
  }

  #checkSymlinkTarget(entry: TarEntry): void {
    const target = entry.linkname;
    if (target === '' || target.includes('\0') || Buffer.byteLength(target) > MAX_PATH_BYTES) {
      throw new UnsafeArchiveError(
        entry.path,
        `symlink target ${JSON.stringify(target.slice(0, 64))} is empty, has a NUL byte or is too long`,
      );
    }
  }

  #hardlinkTarget(entry: TarEntry): string {
    const targetRel = normalizeEntryPath(entry.linkname, entry.path);
    if (targetRel === '') throw new UnsafeArchiveError(entry.path, 'hardlink to the target directory itself');
    this.#refuseThroughSymlink(targetRel, entry.path);
    if (!this.#layer && !this.#files.has(targetRel)) {
      throw new UnsafeArchiveError(
        entry.path,
        `hardlink target ${JSON.stringify(entry.linkname)} is not an earlier file of the archive`,
      );
    }
    return targetRel;
  }

  /** Note what the archive now has at `action.rel` (an entry replaces whatever was there). */
  #record(action: EntryAction): void {
    const { rel } = action;
    this.#symlinks.delete(rel);
    this.#files.delete(rel);
    // A non-directory replaces a directory with everything under it (directories merge).
    if (action.kind !== 'directory' && this.#holders.has(rel)) {
      for (const set of [this.#symlinks, this.#files]) for (const p of set) if (within(p, rel)) set.delete(p);
    }
    let keep: Set<string> | null = null;
    if (action.kind === 'symlink') keep = this.#symlinks;
    else if (!this.#layer && (action.kind === 'file' || action.kind === 'hardlink')) keep = this.#files;
    if (keep === null) return;
    keep.add(rel);
    for (let dir = parentOf(rel); dir !== '' && !this.#holders.has(dir); dir = parentOf(dir)) {
      this.#holders.add(dir);
    }
  }
}
