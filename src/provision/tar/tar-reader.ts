/**
 * Reading a tar stream entry by entry, with tar-stream's parser (the one tar stack of the bundle:
 * the Kubernetes client brings it too). An async generator of entries over a byte stream, one
 * at a time: each entry's body must be read (or is skipped) before the next entry is produced,
 * so the consumer's async work per entry applies natural backpressure; nothing is buffered
 * whole. tar-stream handles ustar, GNU long names and pax headers (path, linkpath, size); the
 * pax uid, gid and mtime are applied here. What the archive may do to the tree is decided by
 * entry-policy.ts, not here.
 */
import { extract, type Header } from 'tar-stream';
import { UnsafeArchiveError } from '../../errors.js';

/** The kinds of entries a tar can hold (after the metadata headers are folded in). */
export type TarEntryKind =
  'file' | 'directory' | 'symlink' | 'hardlink' | 'char-device' | 'block-device' | 'fifo' | 'other';

/** One archive entry. Read `body` before asking for the next entry (it is skipped otherwise). */
export interface TarEntry {
  path: string;
  kind: TarEntryKind;
  /** The parser's name of the entry's type, for error messages about `other` entries. */
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

/** Where an error of the archive's own structure (not of an entry) is reported. */
const ARCHIVE = '<archive>';

function kindOf(type: Header['type'] | null): TarEntryKind {
  switch (type) {
    case 'file':
    case 'contiguous-file':
      return 'file';
    case 'link':
      return 'hardlink';
    case 'symlink':
      return 'symlink';
    case 'character-device':
      return 'char-device';
    case 'block-device':
      return 'block-device';
    case 'directory':
      return 'directory';
    case 'fifo':
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

/** A parser's error (a bad checksum, a cut archive) as what it means here. */
function archiveError(err: unknown): Error {
  if (err instanceof UnsafeArchiveError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new UnsafeArchiveError(ARCHIVE, `the archive cannot be read: ${message}`, { cause: err });
}

/**
 * An entry's body as an iterable that a consumer may leave early without destroying the
 * archive (tar-stream destroys the whole extract when an entry's stream is destroyed): no
 * `return`, the rest is drained by the reader.
 */
function bodyOf(stream: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
  return {
    [Symbol.asyncIterator]: () => {
      const it = stream[Symbol.asyncIterator]();
      return {
        next: async () => {
          try {
            return await it.next();
          } catch (err) {
            throw archiveError(err);
          }
        },
      };
    },
  };
}

/** Read the entries of a tar stream in order. */
export async function* readTarEntries(source: AsyncIterable<Uint8Array>): AsyncGenerator<TarEntry> {
  const parser = extract();
  // The source's own failure (a decoder's, a download's) is passed on as it is.
  let sourceError: { err: unknown } | undefined;
  const feeding = (async () => {
    try {
      for await (const chunk of source) {
        if (parser.destroyed) return; // the reader stopped: leaving the loop closes the source
        if (
          !parser.write(
            Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength),
          )
        ) {
          await new Promise<void>((resolve) => {
            parser.once('drain', resolve);
            parser.once('close', resolve);
          });
        }
      }
      // A clean end of stream without the zero blocks is accepted, as GNU tar does.
      if (!parser.destroyed) parser.end(null);
    } catch (err) {
      sourceError = { err };
      parser.destroy(err instanceof Error ? err : new Error(String(err)));
    }
  })();
  try {
    for await (const stream of parser) {
      const h = stream.header;
      // null for a type flag tar-stream does not know (GNU sparse `S`, …)
      const type = h.type as Header['type'] | null;
      const pax = (h.pax ?? {}) as Record<string, string>;
      const path = h.name;
      for (const key of Object.keys(pax)) {
        if (key.startsWith('GNU.sparse.'))
          throw new UnsafeArchiveError(path, 'sparse files are not supported');
      }
      if (!Number.isSafeInteger(h.size))
        throw new UnsafeArchiveError(path, `size ${h.size} is not an integer`);
      yield {
        path,
        kind: kindOf(type),
        typeflag: type ?? 'unknown',
        mode: h.mode,
        uid: paxNumber(pax.uid, 'uid', path) ?? h.uid,
        gid: paxNumber(pax.gid, 'gid', path) ?? h.gid,
        size: h.size,
        mtime: paxNumber(pax.mtime, 'mtime', path) ?? h.mtime.getTime() / 1000,
        linkname: (h.linkname as string | null) ?? '',
        body: bodyOf(stream as AsyncIterable<Buffer>),
      };
      // Whatever of the body the consumer left unread.
      stream.resume();
    }
    await feeding;
  } catch (err) {
    if (sourceError !== undefined) throw sourceError.err;
    throw archiveError(err);
  } finally {
    if (!parser.destroyed) parser.destroy();
    feeding.catch(() => undefined);
  }
  if (sourceError !== undefined) throw sourceError.err;
}
