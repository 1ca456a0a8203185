/**
 * Archive entry names → paths relative to the target. Policy: absolute names are REJECTED
 * (not stripped), as is any `..` component; `.` and empty components are dropped, so `./etc/`
 * and `etc` are the same entry. Names are limited to 4096 bytes and 255 bytes per component.
 */
import { UnsafeArchiveError } from '../../errors.js';

export const MAX_PATH_BYTES = 4096;
export const MAX_COMPONENT_BYTES = 255;

/**
 * The normalized relative path of an entry name (`''` for the target root itself), or
 * UNSAFE_ARCHIVE naming the entry. `entry` is the name to report (the name being checked by default).
 */
export function normalizeEntryPath(name: string, entry: string = name): string {
  if (name.includes('\0')) throw new UnsafeArchiveError(entry, 'path contains a NUL byte');
  if (name.startsWith('/'))
    throw new UnsafeArchiveError(entry, `absolute path ${JSON.stringify(name)} is not allowed`);
  const parts: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..')
      throw new UnsafeArchiveError(entry, `path ${JSON.stringify(name)} has a ".." component`);
    const bytes = Buffer.byteLength(part);
    if (bytes > MAX_COMPONENT_BYTES) {
      throw new UnsafeArchiveError(
        entry,
        `path component of ${bytes} bytes exceeds the ${MAX_COMPONENT_BYTES}-byte limit`,
      );
    }
    parts.push(part);
  }
  const rel = parts.join('/');
  const bytes = Buffer.byteLength(rel);
  if (bytes > MAX_PATH_BYTES)
    throw new UnsafeArchiveError(entry, `path of ${bytes} bytes exceeds the ${MAX_PATH_BYTES}-byte limit`);
  return rel;
}

/** The parent of a normalized relative path (`''` for top-level entries). */
export function parentOf(rel: string): string {
  const slash = rel.lastIndexOf('/');
  return slash < 0 ? '' : rel.slice(0, slash);
}

/** The last component of a normalized relative path. */
export function baseOf(rel: string): string {
  return rel.slice(rel.lastIndexOf('/') + 1);
}

/** `a/b` joined under `dir` (`''` is the root). */
export function joinRel(dir: string, name: string): string {
  return dir === '' ? name : `${dir}/${name}`;
}
