/**
 * `applyLayer`: stream one image layer (tar, tar+gzip, tar+zstd where the runtime has a zstd
 * decoder) into a rootfs directory, with the safety rules of `LayerWriter`. Usable on its own
 * (the benchmark feeds it a big tar.gz).
 */
import { realpath, stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { Transform, TransformOptions } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import type { ZlibOptions } from 'node:zlib';
import type { AgentError } from '../../../errors.js';
import {
  describeError,
  ImagePullFailedError,
  PreconditionFailedError,
  toAgentError,
  UnsafeArchiveError,
} from '../../../errors.js';
import { layerCompression, noZstdDecoderError, sniffCompression, zstdDecoderOf } from '../media-types.js';
import type { LayerCompression } from '../media-types.js';
import { LayerWriter } from './layer-writer.js';
import type { ApplyStats } from './layer-writer.js';
import { readTarEntries } from '../../tar/tar-reader.js';

export type { ApplyStats } from './layer-writer.js';

/** Options of `applyLayer`. */
export interface ApplyLayerOptions {
  /** The layer's media type; decides the decoder. Without it the compression is sniffed from the first bytes. */
  mediaType?: string;
  signal?: AbortSignal;
  /** chown entries to the uid/gid in the archive; default: only when running as root. */
  preserveOwnership?: boolean;
}

const isRoot = (): boolean => process.geteuid?.() === 0;

/**
 * The decoder of a compressed layer (gzip, or zstd where `decoderFor` found one). Its output
 * buffer is deep (4 MiB, not 16 KiB) so decompression, which runs in the thread pool, keeps
 * going while entries are written instead of waiting for each read. (`ZlibOptions` does not
 * declare the stream options zlib passes on to its Transform.)
 */
function createDecoder(compression: 'gzip' | 'zstd'): Transform {
  const options: ZlibOptions & TransformOptions = {
    chunkSize: 64 * 1024,
    readableHighWaterMark: 4 * 1024 * 1024,
  };
  const zstd = compression === 'zstd' ? zstdDecoderOf() : undefined;
  if (compression === 'zstd' && !zstd) throw noZstdDecoderError('the layer');
  return zstd ? zstd(options) : createGunzip(options);
}

/** Prefix the first chunk, which was read to sniff the compression, back onto the stream. */
function withHead(head: Buffer | undefined, it: AsyncIterator<Buffer>): Readable {
  async function* chunks(): AsyncGenerator<Buffer> {
    try {
      if (head) yield head;
      for (;;) {
        const next = await it.next();
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await it.return?.();
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

async function decoderFor(
  layer: Readable,
  mediaType: string | undefined,
): Promise<{ source: Readable; compression: LayerCompression }> {
  if (mediaType !== undefined) return { source: layer, compression: layerCompression(mediaType) };
  const it = (layer as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  const first = await it.next();
  const head = first.done ? undefined : first.value;
  const compression = sniffCompression(head ?? Buffer.alloc(0));
  if (compression === 'zstd' && !zstdDecoderOf()) {
    await it.return?.();
    throw noZstdDecoderError('the layer');
  }
  return { source: withHead(head, it), compression };
}

function mapError(
  err: unknown,
  targetDir: string,
  signal: AbortSignal | undefined,
  compression: LayerCompression | undefined,
): AgentError {
  return toAgentError(err, `apply layer to ${targetDir}`, {
    signal,
    // zlib's codes: Z_DATA_ERROR, Z_BUF_ERROR (a cut stream) for both decoders, ZSTD_error_* for zstd.
    otherwise: (message, cause, code) =>
      code?.startsWith('Z_') || code?.startsWith('ZSTD_')
        ? new UnsafeArchiveError(
            '(layer stream)',
            `the ${compression ?? 'compressed'} stream is corrupt: ${describeError(cause)}`,
            { cause },
          )
        : new ImagePullFailedError(message, { cause }),
  });
}

/**
 * Apply one layer to `targetDir` (an existing directory): entries are created, replaced or
 * removed (OCI whiteouts) in archive order. Violations of the extraction rules throw
 * UNSAFE_ARCHIVE naming the entry, as does a corrupt compressed stream; zstd layers throw
 * UNSUPPORTED on a runtime with no zstd decoder. On error the tree is left
 * part-applied: the caller discards it.
 */
export async function applyLayer(
  targetDir: string,
  layer: Readable,
  options: ApplyLayerOptions = {},
): Promise<ApplyStats> {
  const { signal } = options;
  let root: string;
  try {
    root = await realpath(targetDir);
    if (!(await stat(root)).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    layer.destroy();
    throw new PreconditionFailedError(`apply layer: target ${targetDir} is not an existing directory`, {
      cause: err,
    });
  }
  const writer = new LayerWriter(root, {
    preserveOwnership: options.preserveOwnership ?? isRoot(),
    isRoot: isRoot(),
  });
  const apply = async (decoded: AsyncIterable<Buffer>): Promise<void> => {
    for await (const entry of readTarEntries(decoded)) {
      signal?.throwIfAborted();
      try {
        await writer.apply(entry);
      } catch (err) {
        throw toAgentError(err, `apply layer to ${targetDir}: entry ${JSON.stringify(entry.path)}`, {
          otherwise: (message, cause) => new ImagePullFailedError(message, { cause }),
        });
      }
    }
    await writer.finish();
  };
  let compression: LayerCompression | undefined;
  try {
    signal?.throwIfAborted();
    const decoded = await decoderFor(layer, options.mediaType);
    compression = decoded.compression;
    const opts = signal ? { signal } : {};
    if (compression === 'none') await pipeline(decoded.source, apply, opts);
    else await pipeline(decoded.source, createDecoder(compression), apply, opts);
  } catch (err) {
    layer.destroy();
    throw mapError(err, targetDir, signal, compression);
  }
  return writer.stats;
}
