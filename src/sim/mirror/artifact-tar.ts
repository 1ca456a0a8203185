/**
 * A minimal, deterministic ustar writer for the mirror's tarballs (same input → same bytes, so
 * checksums are stable). Also used by tests to craft hostile archives (`../x`, `/abs`).
 */
import { gzipSync } from 'node:zlib';

/** One archive member. `type` defaults to a regular file. */
export interface TarEntry {
  path: string;
  data?: string | Uint8Array;
  mode?: number;
  type?: 'file' | 'dir' | 'symlink';
  linkpath?: string;
}

const BLOCK = 512;
const TYPEFLAG = { file: '0', dir: '5', symlink: '2' } as const;
/** Fixed mtime (2026-01-01) so the bytes do not depend on when they were generated. */
const MTIME = 1_767_225_600;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function header(entry: TarEntry, size: number): Buffer {
  const type = entry.type ?? 'file';
  const h = Buffer.alloc(BLOCK);
  const put = (text: string, offset: number, width: number): void => {
    const bytes = Buffer.from(text, 'utf8');
    if (bytes.length > width) throw new Error(`tar field too long: ${text}`);
    bytes.copy(h, offset);
  };
  put(entry.path, 0, 100);
  put(octal(entry.mode ?? (type === 'dir' ? 0o755 : 0o644), 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(MTIME, 12), 136, 12);
  put('        ', 148, 8);
  put(TYPEFLAG[type], 156, 1);
  put(entry.linkpath ?? '', 157, 100);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  put('root', 265, 32);
  put('root', 297, 32);
  let sum = 0;
  for (const byte of h) sum += byte;
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return h;
}

/** An uncompressed tar archive of `entries`. */
export function createTar(entries: readonly TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const data =
      entry.type === 'file' || entry.type === undefined ? Buffer.from(entry.data ?? '') : Buffer.alloc(0);
    parts.push(header(entry, data.length), data);
    const pad = (BLOCK - (data.length % BLOCK)) % BLOCK;
    if (pad > 0) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

/** A gzip-compressed tar archive of `entries` (deterministic: zlib writes no timestamp). */
export function createTarGz(entries: readonly TarEntry[]): Buffer {
  return gzipSync(createTar(entries), { level: 6 });
}
