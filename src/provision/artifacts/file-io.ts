/** Small file helpers shared by the cache and the installer: writes with backpressure, cleanup, fs errors. */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, realpath, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { PreconditionFailedError } from '../../errors.js';
import type { OpenWrite } from './types.js';

/** Production writer: exclusive create, 1 MiB buffer, fsync before close when `durable`. */
export const defaultOpenWrite: OpenWrite = (file, { mode, durable }) =>
  createWriteStream(file, { flags: 'wx', mode, flush: durable, highWaterMark: 1 << 20 });

/** Open `file` with `openWrite`, keeping its errors from being unhandled (they surface in write/close). */
export function openForWrite(openWrite: OpenWrite, file: string, mode: number, durable: boolean): Writable {
  const out = openWrite(file, { mode, durable });
  out.on('error', () => undefined);
  return out;
}

/** Write one chunk, waiting for `drain` when the stream's buffer is full; rejects on a stream error. */
export async function writeChunk(out: Writable, chunk: Buffer): Promise<void> {
  if (out.errored) throw out.errored;
  if (out.write(chunk)) return;
  await new Promise<void>((resolve, reject) => {
    const cleanup = (): void => {
      out.off('drain', onDrain);
      out.off('error', onError);
      out.off('close', onClose);
    };
    const onDrain = (): void => {
      cleanup();
      resolve();
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onClose = (): void => {
      cleanup();
      reject(out.errored ?? new Error('write stream closed before drain'));
    };
    out.on('drain', onDrain);
    out.on('error', onError);
    out.on('close', onClose);
  });
}

/** End the stream and wait until its data is on disk (fsync + close for the default writer). */
export async function endWritable(out: Writable): Promise<void> {
  if (out.errored) throw out.errored;
  out.end();
  await finished(out);
}

/** Destroy a stream after a failure and wait for it to release its file. */
export async function destroyQuietly(out: Writable): Promise<void> {
  if (!out.destroyed) out.destroy();
  await finished(out).catch(() => undefined);
}

/** A temp name next to `file`, hidden, unique per call. */
export function tempNameFor(file: string, tag = 'agentd'): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${tag}-${randomBytes(6).toString('hex')}`);
}

export async function removeQuietly(file: string): Promise<void> {
  await rm(file, { force: true, recursive: true }).catch(() => undefined);
}

/**
 * Create `rel` (a directory relative to the rootfs) and return its real path, refusing when a
 * symlink in the rootfs makes it resolve outside the rootfs (an image could point
 * `usr/local/bin` at the host's).
 */
export async function ensureDirInRootfs(rootfsDir: string, rel: string): Promise<string> {
  const root = await realpath(rootfsDir);
  const dir = path.join(root, rel);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  const real = await realpath(dir);
  if (real !== root && !real.startsWith(`${root}${path.sep}`)) {
    throw new PreconditionFailedError(
      `rootfs path ${rel}: expected a directory inside ${root}, but it resolves to ${real} (a symlink in the rootfs points outside it)`,
      { data: { rootfs: root, path: rel, resolved: real } },
    );
  }
  return real;
}
