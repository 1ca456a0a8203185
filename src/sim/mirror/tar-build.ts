/**
 * Building tar archives by hand from a list of entries: the mirror's artifact tarballs and
 * image layers, and the tests' archives. Deterministic (same entries, same bytes, so checksums
 * are stable). Names are written exactly as given (no normalization), so tests can also build
 * hostile archives; long names go into pax headers.
 */
import { gzipSync } from 'node:zlib';

/** Entry kinds the builder can write. */
export type TarBuildType =
  'file' | 'directory' | 'symlink' | 'hardlink' | 'char-device' | 'block-device' | 'fifo';

/** One entry of an archive to build. */
export interface TarBuildEntry {
  /** Written verbatim (`etc/hostname`, `./bin/`, even `../x` or `/abs`). */
  path: string;
  /** Default `file`. */
  type?: TarBuildType;
  /** Raw type flag written instead of the one `type` implies (tests: GNU `L`, sparse `S`, …). */
  typeflag?: string;
  content?: string | Uint8Array;
  /** Default 0o644 for files, 0o755 for directories, 0o777 for links. */
  mode?: number;
  /** Symlink target or hardlink target (an archive path). */
  linkTarget?: string;
  /** Seconds since the epoch; default a fixed time so builds are reproducible. */
  mtime?: number;
  uid?: number;
  gid?: number;
  devMajor?: number;
  devMinor?: number;
}

/** The mtime of entries that do not set one (2026-01-01T00:00:00Z). */
export const DEFAULT_MTIME = 1_767_225_600;

const TYPEFLAGS: Record<TarBuildType, string> = {
  file: '0',
  hardlink: '1',
  symlink: '2',
  'char-device': '3',
  'block-device': '4',
  directory: '5',
  fifo: '6',
};

function octal(block: Buffer, offset: number, length: number, value: number): void {
  block.write(`${value.toString(8).padStart(length - 1, '0')}\0`, offset, length, 'latin1');
}

function header(name: string, typeflag: string, size: number, e: TarBuildEntry, linkname: string): Buffer {
  const block = Buffer.alloc(512);
  block.write(name, 0, 100, 'utf8');
  const type = e.type ?? 'file';
  octal(
    block,
    100,
    8,
    e.mode ?? (type === 'directory' ? 0o755 : type === 'symlink' || type === 'hardlink' ? 0o777 : 0o644),
  );
  octal(block, 108, 8, e.uid ?? 0);
  octal(block, 116, 8, e.gid ?? 0);
  octal(block, 124, 12, size);
  octal(block, 136, 12, e.mtime ?? DEFAULT_MTIME);
  block.write(typeflag, 156, 1, 'latin1');
  block.write(linkname, 157, 100, 'utf8');
  block.write('ustar\0', 257, 6, 'latin1');
  block.write('00', 263, 2, 'latin1');
  block.write('root', 265, 32, 'latin1');
  block.write('root', 297, 32, 'latin1');
  octal(block, 329, 8, e.devMajor ?? 0);
  octal(block, 337, 8, e.devMinor ?? 0);
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
  return block;
}

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(body);
  // the length field counts its own digits
  while (String(length).length + Buffer.byteLength(body) !== length)
    length = String(length).length + Buffer.byteLength(body);
  return `${length}${body}`;
}

function padded(data: Buffer): Buffer[] {
  const rest = data.length % 512;
  return rest === 0 ? [data] : [data, Buffer.alloc(512 - rest)];
}

/** An uncompressed tar archive of `entries`, in order, with the end-of-archive blocks. */
export function buildTar(entries: readonly TarBuildEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? 'file';
    const content = e.content === undefined ? Buffer.alloc(0) : Buffer.from(e.content);
    const size = content.length;
    const linkname = e.linkTarget ?? '';
    const long = Buffer.byteLength(e.path) > 100 || Buffer.byteLength(linkname) > 100;
    if (long) {
      const records =
        paxRecord('path', e.path) +
        (Buffer.byteLength(linkname) > 100 ? paxRecord('linkpath', linkname) : '');
      const data = Buffer.from(records, 'utf8');
      parts.push(
        header('PaxHeader', 'x', data.length, { path: 'PaxHeader', mode: 0o644 }, ''),
        ...padded(data),
      );
    }
    // with a pax header the ustar fields only hold a truncated fallback (Buffer.write cuts at 100 bytes)
    parts.push(header(e.path, e.typeflag ?? TYPEFLAGS[type], size, e, linkname));
    if (size > 0) parts.push(...padded(content));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/** `buildTar` gzipped (deterministic: zlib writes no timestamp). */
export function buildTarGz(entries: readonly TarBuildEntry[]): Buffer {
  return gzipSync(buildTar(entries), { level: 6 });
}
