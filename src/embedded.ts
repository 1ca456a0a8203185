/**
 * The files the release executable carries besides its small main script: the programs' bundles,
 * their V8 code caches and the download worker (scripts/release/release.ts writes them,
 * src/bin/sea-main.ts and src/provision/artifacts/sink.ts read them).
 *
 * Why not the single executable application's own assets: those live in a section of the
 * executable that the kernel maps with its code, so once read (agentd reads its ~3 MiB bundle and
 * its cache at every start) their pages stay in the process's resident memory for its whole life,
 * 4.5 MiB of an idle daemon's RSS. These files follow the executable's own bytes instead, where
 * no program header points: the kernel never maps them, a process reads what it needs with plain
 * reads and keeps only the copy it uses (docs/benchmarks.md, "Footprint").
 *
 * Layout of the end of the executable: the files' bytes, one after another; their index (JSON:
 * each file's name, offset from the first file's first byte, and length); a footer of 16 bytes:
 * the magic `AGENTDP1`, the index's length and the length of files and index together (each an
 * unsigned 32-bit little-endian integer).
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

const MAGIC = 'AGENTDP1';
const FOOTER_BYTES = 16;

/** One embedded file: where its bytes are, from the first file's first byte. */
interface IndexEntry {
  name: string;
  offset: number;
  length: number;
}

/** The payload to append to an executable: `files` (name → bytes) in the layout above. */
export function encodeEmbedded(files: ReadonlyMap<string, Buffer>): Buffer {
  const index: IndexEntry[] = [];
  let offset = 0;
  for (const [name, bytes] of files) {
    index.push({ name, offset, length: bytes.length });
    offset += bytes.length;
  }
  const indexBytes = Buffer.from(JSON.stringify(index), 'utf8');
  const footer = Buffer.alloc(FOOTER_BYTES);
  footer.write(MAGIC, 0, 'latin1');
  footer.writeUInt32LE(indexBytes.length, 8);
  footer.writeUInt32LE(offset + indexBytes.length, 12);
  return Buffer.concat([...files.values(), indexBytes, footer]);
}

/** The executable's embedded files are missing or damaged: it is not the file the release built. */
export class EmbeddedFilesError extends Error {
  override name = 'EmbeddedFilesError';
}

/** The files embedded in one executable. */
export interface EmbeddedFiles {
  /** The bytes of the file `name`, or undefined when the executable carries none of that name. */
  read(name: string): Buffer | undefined;
}

function readAt(fd: number, position: number, length: number): Buffer {
  const buf = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const n = readSync(fd, buf, done, length - done, position + done);
    if (n === 0) throw new Error(`unexpected end of file at byte ${position + done}`);
    done += n;
  }
  return buf;
}

/** How much of the end of the file the first read takes: the footer and, nearly always, the index. */
const TAIL_BYTES = 4096;

/**
 * The files embedded in the executable `file`, or undefined when it carries none (no footer).
 * Throws an EmbeddedFilesError when the file cannot be opened or its footer or index is damaged.
 * The file stays open for
 * later reads: the default, `/proc/self/exe`, is the running executable, and the descriptor
 * keeps reading that file even after an upgrade has put another one at its path, so a file read
 * late (the download worker, at the first large download) always comes from the same executable
 * as the code that reads it.
 */
export function openEmbedded(file = '/proc/self/exe'): EmbeddedFiles | undefined {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw new EmbeddedFilesError(`cannot open ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  let index: Map<string, IndexEntry>;
  let filesStart: number;
  try {
    const size = fstatSync(fd).size;
    if (size < FOOTER_BYTES) {
      closeSync(fd);
      return undefined;
    }
    const tailStart = Math.max(0, size - TAIL_BYTES);
    const tail = readAt(fd, tailStart, size - tailStart);
    const footer = tail.subarray(tail.length - FOOTER_BYTES);
    if (footer.toString('latin1', 0, 8) !== MAGIC) {
      closeSync(fd);
      return undefined;
    }
    const indexLength = footer.readUInt32LE(8);
    const payloadLength = footer.readUInt32LE(12);
    filesStart = size - FOOTER_BYTES - payloadLength;
    const filesLength = payloadLength - indexLength;
    const damaged = (why: string): Error => new EmbeddedFilesError(`its embedded files are damaged (${why})`);
    if (indexLength > payloadLength || filesStart < 0) throw damaged('footer out of range');
    const indexStart = filesStart + filesLength;
    const indexBytes =
      indexStart >= tailStart
        ? tail.subarray(indexStart - tailStart, indexStart - tailStart + indexLength)
        : readAt(fd, indexStart, indexLength);
    let entries: IndexEntry[];
    try {
      entries = JSON.parse(indexBytes.toString('utf8')) as IndexEntry[];
    } catch (err) {
      throw damaged(`index unreadable: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (!Array.isArray(entries)) throw damaged('index is not a list');
    index = new Map();
    for (const e of entries) {
      const valid =
        typeof e?.name === 'string' &&
        Number.isSafeInteger(e.offset) &&
        Number.isSafeInteger(e.length) &&
        e.offset >= 0 &&
        e.length >= 0 &&
        e.offset + e.length <= filesLength;
      if (!valid) throw damaged(`bad index entry ${JSON.stringify(e)}`);
      index.set(e.name, e);
    }
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return {
    read(name) {
      const e = index.get(name);
      return e ? readAt(fd, filesStart + e.offset, e.length) : undefined;
    },
  };
}

let running: { files: EmbeddedFiles | undefined } | undefined;

/** The running executable's embedded files (`openEmbedded()`), opened once per bundle that asks. */
export function runningExecutableFiles(): EmbeddedFiles | undefined {
  running ??= { files: openEmbedded() };
  return running.files;
}
