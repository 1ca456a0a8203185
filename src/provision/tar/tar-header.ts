/**
 * Decoding tar headers: ustar/GNU 512-byte headers (octal or base-256 numbers, checksum) and
 * pax extended-header records. Malformed input is UNSAFE_ARCHIVE: a layer that cannot be read
 * exactly is not applied.
 */
import { UnsafeArchiveError } from '../../errors.js';

export const BLOCK = 512;

/** A decoded 512-byte header, before pax/GNU long-name overrides are applied. */
export interface RawHeader {
  name: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  typeflag: string;
  linkname: string;
}

function cString(block: Buffer, start: number, length: number): string {
  const end = block.indexOf(0, start);
  return block.toString('utf8', start, end < 0 || end > start + length ? start + length : end);
}

function number(block: Buffer, start: number, length: number, field: string, where: string): number {
  const first = block[start] ?? 0;
  if (first & 0x80) {
    // GNU base-256: big-endian, the top bit of the first byte is the marker; 0xff means negative
    if (first === 0xff) throw new UnsafeArchiveError(where, `negative ${field} in header`);
    let value = first & 0x7f;
    for (let i = start + 1; i < start + length; i++) value = value * 256 + (block[i] ?? 0);
    if (!Number.isSafeInteger(value)) throw new UnsafeArchiveError(where, `${field} in header is too large`);
    return value;
  }
  const text = block
    .toString('latin1', start, start + length)
    .replace(/[\0 ]+$/, '')
    .replace(/^ +/, '');
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text))
    throw new UnsafeArchiveError(where, `${field} ${JSON.stringify(text)} in header is not octal`);
  return parseInt(text, 8);
}

/** True for an all-zero block (the end-of-archive marker). */
export function isZeroBlock(block: Buffer): boolean {
  for (let i = 0; i < BLOCK; i++) if (block[i] !== 0) return false;
  return true;
}

/** Decode one header block; `offset` (its position in the stream) names it in errors. */
export function parseHeader(block: Buffer, offset: number): RawHeader {
  const where = `<header at byte ${offset}>`;
  const stored = number(block, 148, 8, 'checksum', where);
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const byte = i >= 148 && i < 156 ? 0x20 : (block[i] ?? 0);
    unsigned += byte;
    signed += byte > 127 ? byte - 256 : byte;
  }
  if (stored !== unsigned && stored !== signed) {
    throw new UnsafeArchiveError(
      where,
      `header checksum mismatch (stored ${stored}, computed ${unsigned}): not a tar archive or corrupt`,
    );
  }
  const magic = block.toString('latin1', 257, 263);
  let name = cString(block, 0, 100);
  // POSIX ustar splits long names into prefix + name; GNU tar uses those bytes for other things
  if (magic === 'ustar\0') {
    const prefix = cString(block, 345, 155);
    if (prefix) name = `${prefix}/${name}`;
  }
  const flag = block[156] ?? 0;
  return {
    name,
    mode: number(block, 100, 8, 'mode', where),
    uid: number(block, 108, 8, 'uid', where),
    gid: number(block, 116, 8, 'gid', where),
    size: number(block, 124, 12, 'size', where),
    mtime: number(block, 136, 12, 'mtime', where),
    typeflag: flag === 0 ? '0' : String.fromCharCode(flag),
    linkname: cString(block, 157, 100),
  };
}

/** Decode pax extended-header records (`<len> <key>=<value>\n`). */
export function parsePax(data: Buffer, where: string): Map<string, string> {
  const records = new Map<string, string>();
  let pos = 0;
  while (pos < data.length) {
    if (data[pos] === 0) break; // padding some writers leave
    const space = data.indexOf(0x20, pos);
    const length = space > pos ? Number(data.toString('latin1', pos, space)) : NaN;
    if (
      !Number.isSafeInteger(length) ||
      length <= space - pos ||
      pos + length > data.length ||
      data[pos + length - 1] !== 0x0a
    ) {
      throw new UnsafeArchiveError(where, `malformed pax record at byte ${pos} of the extended header`);
    }
    const record = data.toString('utf8', space + 1, pos + length - 1);
    const eq = record.indexOf('=');
    if (eq <= 0)
      throw new UnsafeArchiveError(where, `malformed pax record ${JSON.stringify(record.slice(0, 64))}`);
    records.set(record.slice(0, eq), record.slice(eq + 1));
    pos += length;
  }
  return records;
}
