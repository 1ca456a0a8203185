/**
 * The content-addressed blob cache (`<cacheDir>/sha256/<hex>`): a blob is streamed to a temp
 * file next to its final name, hashed on the way, and renamed into place only once its digest
 * and size match the descriptor, so a file under its digest name is always the right bytes.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { ChecksumMismatchError, ImagePullFailedError, noSpaceOr } from '../../errors.js';
import { createDownloadSink } from '../artifacts/sink.js';
import { digestHex } from './digest.js';
import type { RegistryClient } from './registry-client.js';
import { TransientPullError } from './retry.js';
import type { Descriptor } from './types.js';

/** Where a blob lives in the cache. */
export function blobCachePath(cacheDir: string, digest: string): string {
  return path.join(cacheDir, 'sha256', digestHex(digest));
}

/** The outcome of `ensureBlob`. */
export interface CachedBlob {
  path: string;
  /** Bytes fetched from the registry for this blob (0 on a cache hit). */
  downloadedBytes: number;
}

/**
 * Make sure the blob is in the cache, downloading it when it is not. A cached file is trusted
 * when its size matches: it got its name only after its digest was verified.
 * `onBytes` sees every chunk received (for progress).
 */
export async function ensureBlob(
  client: RegistryClient,
  descriptor: Descriptor,
  cacheDir: string,
  onBytes: (n: number) => void = () => undefined,
): Promise<CachedBlob> {
  const final = blobCachePath(cacheDir, descriptor.digest);
  const existing = await stat(final).catch(() => undefined);
  if (existing?.isFile() && existing.size === descriptor.size) return { path: final, downloadedBytes: 0 };
  await mkdir(path.dirname(final), { recursive: true });
  const downloadedBytes = await client.fetchBlob(descriptor, (body, what, received) =>
    downloadTo(final, body, descriptor, what, (n) => {
      received(n);
      onBytes(n);
    }),
  );
  return { path: final, downloadedBytes };
}

async function downloadTo(
  final: string,
  body: Readable,
  descriptor: Descriptor,
  what: string,
  onBytes: (n: number) => void,
): Promise<number> {
  const tmp = path.join(path.dirname(final), `.tmp-${digestHex(descriptor.digest)}-${randomUUID()}`);
  // Large blobs are written and hashed on the worker thread (see artifacts/sink.ts); durable
  // before the file takes the name that promises verified content.
  const sink = createDownloadSink(tmp, { expectedBytes: descriptor.size, mode: 0o644, durable: true });
  let verified = false;
  let received = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      const size = chunk.length;
      received += size;
      if (received > descriptor.size) {
        throw new ImagePullFailedError(
          `${what}: blob is larger than the ${descriptor.size} bytes its descriptor declares (received ${received} bytes)`,
          { data: { receivedBytes: received, limitBytes: descriptor.size } },
        );
      }
      // Counted (and bounded: onBytes may throw) before the sink takes the chunk.
      onBytes(size);
      // the sink may take the chunk over: it is not used after this
      const room = sink.write(chunk);
      if (!room) await new Promise<void>((resume) => sink.onRoom(resume));
    }
    if (received < descriptor.size) {
      throw new TransientPullError(`${what}: body ended after ${received} of ${descriptor.size} bytes`);
    }
    const actual = `sha256:${(await sink.finish()).sha256}`;
    if (actual !== descriptor.digest)
      throw new ChecksumMismatchError(`${what}: blob`, descriptor.digest, actual);
    verified = true;
  } catch (err) {
    throw noSpaceOr(err, `${what}: write ${tmp}`);
  } finally {
    if (!verified) await sink.abort();
  }
  await rename(tmp, final);
  return received;
}
