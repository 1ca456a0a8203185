/**
 * A streaming tar reader: an async generator of entries over a byte stream, one at a time.
 * Each entry's body must be read (or is skipped) before the next entry is produced, so the
 * consumer's async work per entry applies natural backpressure; nothing is buffered whole.
 * Handles ustar, GNU long names (`L`/`K`) and pax headers (`x`/`g`).
 */
import { UnsafeArchiveError } from '../../errors.js';
import { BLOCK, isZeroBlock, parseHeader, parsePax } from './tar-header.js';

/** The kinds of entries a tar can hold (after the metadata headers are folded in). */
export type TarEntryKind =
  'file' | 'directory' | 'symlink' | 'hardlink' | 'char-device' | 'block-device' | 'fifo' | 'other';

/** One archive entry. Read `body` before asking for the next entry (it is skipped otherwise). */
export interface TarEntry {
  path: string;
  kind: TarEntryKind;
  /** The raw type flag, for error messages about `other` entries. */
  typeflag: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  /** Seconds since the epoch (may be fractional with pax). */
  mtime: number;
  linkname: string;
  body: AsyncIterable<Buffer>;
}

const MAX_META_BYTES = 1024 * 1024;
const EMPTY = Buffer.alloc(0);

/** Sequential reads over an async iterable of chunks; slices are handed out without copying. */
class ByteReader {
  position = 0;
  #it: AsyncIterator<Uint8Array>;
  #chunk: Buffer = EMPTY;
  #done = false;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.#it = source[Symbol.asyncIterator]();
  }

  async #fill(): Promise<boolean> {
    while (this.#chunk.length === 0) {
      if (this.#done) return false;
      const next = await this.#it.next();
      if (next.done) {
        this.#done = true;
        return false;
      }
      const v = next.value;
      this.#chunk = Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
    }
    return true;
  }

  /** Exactly `n` bytes, or null at a clean end of stream; a partial read is a truncated archive. */
  async readExact(n: number, where: string): Promise<Buffer | null> {
    if (!(await this.#fill())) return null;
    if (this.#chunk.length >= n) {
      const out = this.#chunk.subarray(0, n);
      this.#chunk = this.#chunk.subarray(n);
      this.position += n;
      return out;
    }
    const parts: Buffer[] = [];
    for await (const part of this.take(n, where)) parts.push(part);
    return Buffer.concat(parts, n);
  }

  /** Yield the next `n` bytes as slices of the incoming chunks. */
  async *take(n: number, where: string): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (!(await this.#fill()))
        throw new UnsafeArchiveError(where, `archive is truncated (${left} bytes missing)`);
      const out = this.#chunk.length > left ? this.#chunk.subarray(0, left) : this.#chunk;
      this.#chunk = this.#chunk.subarray(out.length);
      this.position += out.length;
      left -= out.length;
      yield out;
    }
  }

  async skip(n: number, where: string): Promise<void> {
    for await (const _ of this.take(n, where)) {
      // discard
    }
  }

  /** Consume whatever follows (end-of-archive padding), so the decoder checks its trailer. */
  async drain(): Promise<void> {
    while (await this.#fill()) {
      this.position += this.#chunk.length;
      this.#chunk = EMPTY;
    }
  }
}

function kindOf(typeflag: string, name: string): TarEntryKind {
  switch (typeflag) {
    case '0':
    case '7':
      // pre-POSIX archives mark directories only by the trailing slash
      return name.endsWith('/') ? 'directory' : 'file';
    case '1':
      return 'hardlink';
    case '2':
      return 'symlink';
    case '3':
      return 'char-device';
    case '4':
      return 'block-device';
    case '5':
      return 'directory';
    case '6':
      return 'fifo';
    default:
      return 'other';
  }
}

function paxNumber(value: string | undefined, key: string, where: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0)
    throw new UnsafeArchiveError(where, `pax ${key}=${JSON.stringify(value)} is not a number`);
  return n;
}

/** Read the entries of a tar stream in order. */
export async function* readTarEntries(source: AsyncIterable<Uint8Array>): AsyncGenerator<TarEntry> {
  const reader = new ByteReader(source);
  const global = new Map<string, string>();
  let pax = new Map<string, string>();
  let longName: string | undefined;
  let longLink: string | undefined;

  for (;;) {
    const offset = reader.position;
    const where = `<header at byte ${offset}>`;
    const block = await reader.readExact(BLOCK, where);
    // A clean end of stream without the zero blocks is accepted, as GNU tar does.
    if (block === null) return;
    if (isZeroBlock(block)) {
      await reader.drain();
      return;
    }
    const header = parseHeader(block, offset);
    const padding = (BLOCK - (header.size % BLOCK)) % BLOCK;

    if (
      header.typeflag === 'x' ||
      header.typeflag === 'g' ||
      header.typeflag === 'L' ||
      header.typeflag === 'K'
    ) {
      if (header.size > MAX_META_BYTES) {
        throw new UnsafeArchiveError(
          header.name || where,
          `metadata header of ${header.size} bytes exceeds ${MAX_META_BYTES}`,
        );
      }
      const data = (await reader.readExact(header.size, where)) ?? EMPTY;
      await reader.skip(padding, where);
      if (header.typeflag === 'x') pax = parsePax(data, header.name || where);
      else if (header.typeflag === 'g')
        for (const [k, v] of parsePax(data, header.name || where)) global.set(k, v);
      else {
        const end = data.indexOf(0);
        const text = data.toString('utf8', 0, end < 0 ? data.length : end);
        if (header.typeflag === 'L') longName = text;
        else longLink = text;
      }
      continue;
    }

    const get = (key: string): string | undefined => pax.get(key) ?? global.get(key);
    const path = get('path') || longName || header.name;
    for (const key of pax.keys()) {
      if (key.startsWith('GNU.sparse.')) throw new UnsafeArchiveError(path, 'sparse files are not supported');
    }
    const size = paxNumber(get('size'), 'size', path) ?? header.size;
    if (!Number.isSafeInteger(size)) throw new UnsafeArchiveError(path, `size ${size} is not an integer`);
    const bodyStart = reader.position;
    const entry: TarEntry = {
      path,
      kind: kindOf(header.typeflag, path),
      typeflag: header.typeflag,
      mode: header.mode,
      uid: paxNumber(get('uid'), 'uid', path) ?? header.uid,
      gid: paxNumber(get('gid'), 'gid', path) ?? header.gid,
      size,
      mtime: paxNumber(get('mtime'), 'mtime', path) ?? header.mtime,
      linkname: get('linkpath') || longLink || header.linkname,
      body: reader.take(size, path),
    };
    pax = new Map();
    longName = undefined;
    longLink = undefined;
    yield entry;
    // whatever of the body the consumer left unread, then the padding to the next block
    await reader.skip(bodyStart + size - reader.position, path);
    await reader.skip(padding, path);
  }
}
