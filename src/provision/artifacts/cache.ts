/**
 * The content-addressed download cache: `cacheDir/sha256/<hex>`. A file only ever appears there
 * under its verified digest: downloads stream to a temp file in the same directory while being
 * hashed, and are renamed into place only when the digest matches.
 */
import { mkdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import type { ProgressSink } from '../../host/types.js';
import { ChecksumMismatchError, DownloadFailedError, InvalidConfigError } from '../../errors.js';
import {
  destroyQuietly,
  endWritable,
  openForWrite,
  removeQuietly,
  tempNameFor,
  toFsError,
} from './file-io.js';
import { createStreamHasher, type StreamHasher, type StreamHasherOptions } from './hasher.js';
import { contentLength, markTransient, send, statusError, withRetries, type HttpContext } from './http.js';
import { createByteProgress } from './progress.js';
import type { OpenWrite } from './types.js';

/** One file to fetch into the cache. */
export interface CacheRequest {
  /** What is being done, for messages: `download kubelet 1.34.0`. */
  what: string;
  url: string;
  /** Expected lowercase SHA-256 hex. */
  sha256: string;
  /** Progress task name: `download kubelet`. */
  task: string;
}

export interface CacheDeps {
  ctx: HttpContext;
  cacheDir: string;
  openWrite: OpenWrite;
  progress?: ProgressSink;
  /** Where downloads are hashed (default `auto`: by size and CPU count). */
  hashMode?: StreamHasherOptions['mode'];
}

/** Where a verified file lives; `bytes` is what was downloaded for it now (0 on a hit). */
export interface CachedFile {
  path: string;
  bytes: number;
  cacheHit: boolean;
}

/** Path of the cache entry for `sha256`. */
export function cacheEntryPath(cacheDir: string, sha256: string): string {
  return path.join(cacheDir, 'sha256', sha256);
}

/** The cache entry for `req.sha256`, downloading it (with retries) when it is not there yet. */
export async function ensureCached(req: CacheRequest, deps: CacheDeps): Promise<CachedFile> {
  // The digest becomes a file name: anything but 64 lowercase hex digits could leave the cache dir.
  if (!/^[0-9a-f]{64}$/.test(req.sha256)) {
    throw new InvalidConfigError(
      `${req.what}: expected sha256 to be 64 lowercase hex digits, received ${JSON.stringify(req.sha256)}`,
    );
  }
  const file = cacheEntryPath(deps.cacheDir, req.sha256);
  if (await isFile(file)) return { path: file, bytes: 0, cacheHit: true };
  await mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
  const bytes = await withRetries(deps.ctx, req.what, req.url, () => downloadOnce(req, deps, file));
  return { path: file, bytes, cacheHit: false };
}

async function isFile(file: string): Promise<boolean> {
  try {
    return (await stat(file)).isFile();
  } catch {
    return false;
  }
}

/** One attempt: GET, stream to a temp file while hashing, verify, rename. Leaves nothing behind on failure. */
async function downloadOnce(req: CacheRequest, deps: CacheDeps, file: string): Promise<number> {
  const tmp = tempNameFor(file, 'partial');
  let out: Writable | undefined;
  let hasher: StreamHasher | undefined;
  try {
    const res = await send(deps.ctx, 'GET', req.url);
    if (res.statusCode < 200 || res.statusCode >= 300) {
      await res.body.dump();
      throw statusError(req.what, 'GET', req.url, res.statusCode);
    }
    const total = contentLength(res);
    const progress = createByteProgress(deps.progress, deps.ctx.clock, req.task, total);
    // No fsync: entries are verified on every use (see OpenWrite).
    out = openForWrite(deps.openWrite, tmp, 0o644, false);
    hasher = createStreamHasher(total, { mode: deps.hashMode ?? 'auto', file: tmp });
    const bytes = await pumpBody(res.body, out, hasher, (n) => progress.update(n));
    if (total !== undefined && bytes !== total) {
      throw markTransient(
        new DownloadFailedError(
          `${req.what} from ${req.url}: body truncated (received ${bytes} of ${total} bytes)`,
          {
            data: { url: req.url, receivedBytes: bytes, expectedBytes: total },
          },
        ),
      );
    }
    await endWritable(out);
    out = undefined;
    const got = await hasher.digest();
    hasher = undefined;
    if (got !== req.sha256) {
      throw new ChecksumMismatchError(`${req.what} from ${req.url}`, req.sha256, got, {
        data: { url: req.url },
      });
    }
    // Why rename last: the entry name is the digest, so it must only exist once verified.
    await rename(tmp, file);
    progress.done(bytes);
    return bytes;
  } catch (err) {
    hasher?.dispose();
    if (out) await destroyQuietly(out);
    await removeQuietly(tmp);
    throw toFsError(err, `${req.what}: write ${tmp}`);
  }
}

/**
 * Copy `body` into `out` while hashing, with back-pressure from the file: the hasher sees each
 * chunk as it arrives and again once it is written. Event-based rather than `for await`:
 * per-chunk promises cost a large share of the CPU at loopback speeds. Resolves with the byte
 * count at the end of the body; rejects (and destroys the body, aborting the request) on any
 * error of either side.
 */
function pumpBody(
  body: Readable,
  out: Writable,
  hasher: StreamHasher,
  onBytes: (bytes: number) => void,
): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let bytes = 0;
    let settled = false;
    const resume = (): void => {
      if (!settled) body.resume();
    };
    const cleanup = (): void => {
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', fail);
      out.off('error', fail);
      out.off('close', onOutClose);
      out.off('drain', resume);
    };
    function fail(err: unknown): void {
      if (settled) return;
      settled = true;
      cleanup();
      body.destroy();
      reject(err instanceof Error ? err : new Error(String(err)));
    }
    function onData(chunk: Buffer): void {
      bytes += chunk.length;
      hasher.update(chunk);
      const size = chunk.length;
      // Written chunks complete in order; a failed write surfaces as the stream's error.
      const full = !out.write(chunk, (err) => {
        if (!err) hasher.written(size);
      });
      if (full) {
        body.pause();
        out.once('drain', resume);
      }
      onBytes(bytes);
    }
    function onEnd(): void {
      if (settled) return;
      settled = true;
      cleanup();
      resolve(bytes);
    }
    function onOutClose(): void {
      fail(out.errored ?? new Error('the output file was closed before the download ended'));
    }
    if (out.errored) {
      fail(out.errored);
      return;
    }
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', fail);
    out.once('error', fail);
    out.once('close', onOutClose);
  });
}
