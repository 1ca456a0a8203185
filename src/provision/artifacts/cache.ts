/**
 * The content-addressed download cache: `cacheDir/sha256/<hex>`. A file only ever appears there
 * under its verified digest: downloads stream to a temp file in the same directory while being
 * hashed (see sink.ts), and are renamed into place only when the digest matches.
 */
import { mkdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { ProgressSink } from '../../host/types.js';
import { ChecksumMismatchError, DownloadFailedError, InvalidConfigError, noSpaceOr } from '../../errors.js';
import { removeQuietly, tempNameFor } from './file-io.js';
import { contentLength, markTransient, send, statusError, withRetries, type HttpContext } from './http.js';
import { createByteProgress } from './progress.js';
import { createDownloadSink, type DownloadSink, type DownloadSinkOptions } from './sink.js';
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
  /** Test seam: the writer for downloads (then they are written on this thread); default: the sink's choice. */
  openWrite?: OpenWrite;
  progress?: ProgressSink;
  /** Where downloads are written and hashed (default `auto`: by size and CPU count). */
  sink?: Pick<DownloadSinkOptions, 'where' | 'maxBacklogBytes'>;
  /** The limit of a body whose size nothing declares (default `MAX_ARTIFACT_BYTES`; tests make it small). */
  maxBytes?: number;
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

/**
 * The most an artifact may be when neither its GET nor its HEAD declares a size: the largest
 * artifact agentd installs (kubelet, ~80 MiB) many times over, and far less than the free space
 * preflight asks for (docs/operations.md, "Limits").
 */
export const MAX_ARTIFACT_BYTES = 1024 ** 3;

/** One attempt: GET, stream to a temp file while hashing, verify, rename. Leaves nothing behind on failure. */
async function downloadOnce(req: CacheRequest, deps: CacheDeps, file: string): Promise<number> {
  const tmp = tempNameFor(file, 'partial');
  let sink: DownloadSink | undefined;
  try {
    return await send(deps.ctx, 'GET', req.url, req.what, async (res) => {
      if (res.statusCode < 200 || res.statusCode >= 300) {
        await res.body.dump();
        throw statusError(req.what, 'GET', req.url, res.statusCode);
      }
      // A body of no declared length is held to the size a HEAD declares, else to the cap.
      const total = contentLength(res) ?? (await declaredByHead(req, deps));
      res.guard.startBody(total ?? deps.maxBytes ?? MAX_ARTIFACT_BYTES, total);
      const progress = createByteProgress(deps.progress, deps.ctx.clock, req.task, total);
      // No fsync: entries are verified on every use (see OpenWrite).
      sink = createDownloadSink(tmp, {
        expectedBytes: total,
        mode: 0o644,
        durable: false,
        ...deps.sink,
        ...(deps.openWrite ? { openWrite: deps.openWrite } : {}),
      });
      const bytes = await pumpBody(res.body, sink, (n, chunk) => {
        res.guard.received(chunk);
        progress.update(n);
      });
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
      const written = await sink.finish();
      if (written.sha256 !== req.sha256) {
        throw new ChecksumMismatchError(`${req.what} from ${req.url}`, req.sha256, written.sha256, {
          data: { url: req.url },
        });
      }
      // Why rename last: the entry name is the digest, so it must only exist once verified.
      await rename(tmp, file);
      sink = undefined;
      progress.done(bytes);
      return bytes;
    });
  } catch (err) {
    await sink?.abort();
    await removeQuietly(tmp);
    throw noSpaceOr(err, `${req.what}: write ${tmp}`);
  }
}

/** The size a HEAD of the URL declares, or undefined (no Content-Length, or the HEAD failed). */
async function declaredByHead(req: CacheRequest, deps: CacheDeps): Promise<number | undefined> {
  try {
    return await send(deps.ctx, 'HEAD', req.url, `${req.what}: HEAD`, async (res) => {
      await res.body.dump();
      return res.statusCode >= 200 && res.statusCode < 300 ? contentLength(res) : undefined;
    });
  } catch (err) {
    if (deps.ctx.signal.aborted) throw err;
    return undefined;
  }
}

/**
 * Hand `body` to `sink`, pausing while the sink has no room. Event-based rather than
 * `for await`: per-chunk promises cost a large share of the CPU at loopback speeds. `onBytes`
 * sees the running total and the chunk's size before the chunk is written, and may throw. Resolves
 * with the byte count at the end of the body; rejects (and destroys the body, aborting the
 * request) on an error of either side.
 */
function pumpBody(
  body: Readable,
  sink: DownloadSink,
  onBytes: (bytes: number, chunk: number) => void,
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
    };
    function fail(err: unknown): void {
      if (settled) return;
      settled = true;
      cleanup();
      body.destroy();
      reject(err instanceof Error ? err : new Error(String(err)));
    }
    function onData(chunk: Buffer): void {
      const size = chunk.length;
      bytes += size;
      let room: boolean;
      try {
        // Counted first: a chunk past the limit is never written.
        onBytes(bytes, size);
        // the sink may take the chunk over: it is not used after this
        room = sink.write(chunk);
      } catch (err) {
        fail(err);
        return;
      }
      if (!room) {
        body.pause();
        sink.onRoom(resume);
      }
    }
    function onEnd(): void {
      if (settled) return;
      settled = true;
      cleanup();
      resolve(bytes);
    }
    sink.onError(fail);
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', fail);
  });
}
