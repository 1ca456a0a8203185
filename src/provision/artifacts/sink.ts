/**
 * Where a download's bytes go: a temp file, written and SHA-256-hashed as the chunks arrive.
 *
 * Small bodies, bodies of unknown size, single-CPU hosts and injected writers (a test seam) use
 * the inline sink: a write stream on this thread, hashed chunk by chunk. Large bodies go to the
 * worker sink: each received chunk is handed to a shared worker thread by transferring its
 * memory (no copy), and the worker writes it to the file and hashes it. The download thread then
 * does nothing per chunk but receive it, which is what lets a 2-CPU host keep up with curl while
 * also hashing every byte.
 *
 * Measured on 2 vCPUs (bench/provision.ts, 256 MiB against curl, median of paired rounds):
 * hashing inline 0.49–0.71; writing on this thread and hashing on the worker, by reading the file
 * back 0.52–0.99 (median 0.89), by transferred chunks ~0.8; writing and hashing on the worker
 * ~1.0. Transferring also frees each 64 KiB socket buffer on this thread at once instead of
 * leaving 4,096 of them per 256 MiB to the garbage collector.
 */
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import type { Writable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { defaultOpenWrite, destroyQuietly, endWritable, openForWrite, removeQuietly } from './file-io.js';
import type { OpenWrite } from './types.js';

/** What a finished sink wrote. */
export interface SinkResult {
  /** Lowercase SHA-256 hex of the bytes written. */
  sha256: string;
  bytes: number;
}

/** A temp file being written and hashed. */
export interface DownloadSink {
  /**
   * Hand over the next chunk. The sink may take the chunk's memory (a worker sink transfers a
   * chunk that spans its whole ArrayBuffer, which detaches it here): do not use the chunk after.
   * Returns false when the caller should pause until `onRoom`; throws when the sink has failed.
   */
  write(chunk: Buffer): boolean;
  /** Call `resume` once there is room again (at once when there is, or when the sink failed). */
  onRoom(resume: () => void): void;
  /** Call `listener` when writing fails (a full disk, say) while chunks are still coming. */
  onError(listener: (err: Error) => void): void;
  /** Every chunk handed over: flush (fsync when durable) and close the file. */
  finish(): Promise<SinkResult>;
  /** After a failure: stop, close and remove the file. Never rejects. */
  abort(): Promise<void>;
}

/** Bodies at least this large (by Content-Length) go to the worker… */
export const WORKER_SINK_MIN_BYTES = 8 * 1024 * 1024;
/** …when the host has at least this many CPUs (on one, the worker would only take turns with us). */
export const WORKER_SINK_MIN_CPUS = 2;
/** Chunks go to the worker in batches of this many bytes (one message per batch). */
const BATCH_BYTES = 1024 * 1024;
/**
 * At most this many bytes are on their way to the worker or queued in it per download. Without a
 * limit, a network faster than the disk or the hash would queue the whole download in memory;
 * sixteen batches keep the worker busy through a scheduling hiccup on a loaded host.
 */
export const MAX_BACKLOG_BYTES = 16 * 1024 * 1024;

export interface DownloadSinkOptions {
  /** Content-Length, when known (decides `auto`). */
  expectedBytes: number | undefined;
  /** Mode of the file, created exclusively. */
  mode: number;
  /** fsync before close. */
  durable: boolean;
  /** `auto` (default) decides by size and CPU count; the others force it (tests, benchmarks). */
  where?: 'auto' | 'inline' | 'worker';
  /** The worker's backlog limit (default `MAX_BACKLOG_BYTES`; tests make it small to exercise pausing). */
  maxBacklogBytes?: number;
  /** Test seam: a writer on this thread (ENOSPC and the like). Given, the sink is always inline. */
  openWrite?: OpenWrite;
}

/** A sink writing `file`, which must not exist yet. */
export function createDownloadSink(file: string, options: DownloadSinkOptions): DownloadSink {
  const where = options.where ?? 'auto';
  const useWorker =
    options.openWrite === undefined &&
    (where === 'worker' ||
      (where === 'auto' &&
        options.expectedBytes !== undefined &&
        options.expectedBytes >= WORKER_SINK_MIN_BYTES &&
        availableParallelism() >= WORKER_SINK_MIN_CPUS));
  const worker = useWorker ? SinkWorker.shared() : null;
  return worker
    ? worker.session(file, options, options.maxBacklogBytes ?? MAX_BACKLOG_BYTES)
    : inlineSink(file, options);
}

function inlineSink(file: string, options: DownloadSinkOptions): DownloadSink {
  const out: Writable = openForWrite(
    options.openWrite ?? defaultOpenWrite,
    file,
    options.mode,
    options.durable,
  );
  const hash = createHash('sha256');
  let bytes = 0;
  let finishing = false;
  // Why track it: a file that already existed (EEXIST) is someone else's and must not be removed.
  let created = false;
  out.once('open', () => {
    created = true;
  });
  return {
    write(chunk) {
      if (out.errored) throw out.errored;
      hash.update(chunk);
      bytes += chunk.length;
      return out.write(chunk);
    },
    onRoom(resume) {
      if (!out.writableNeedDrain || out.destroyed) resume();
      else out.once('drain', resume);
    },
    onError(listener) {
      if (out.errored) {
        const err = out.errored;
        queueMicrotask(() => listener(err));
        return;
      }
      out.once('error', listener);
      out.once('close', () => {
        if (!finishing) listener(out.errored ?? new Error(`${file} was closed before the download ended`));
      });
    },
    async finish() {
      finishing = true;
      await endWritable(out);
      return { sha256: hash.digest('hex'), bytes };
    },
    async abort() {
      finishing = true;
      await destroyQuietly(out);
      if (created) await removeQuietly(file);
    },
  };
}

/**
 * The memory of `chunk` as an ArrayBuffer the worker may own: the chunk's own buffer when the
 * chunk spans all of it (socket reads: one 64 KiB buffer each), otherwise a copy (slices of
 * Node's shared pool, views into larger buffers, SharedArrayBuffers).
 */
function ownedBuffer(chunk: Buffer): ArrayBuffer {
  const ab = chunk.buffer;
  if (ab instanceof ArrayBuffer && chunk.byteOffset === 0 && chunk.byteLength === ab.byteLength) return ab;
  return new Uint8Array(chunk).buffer;
}

// The worker runs as an eval'd CommonJS script so it works the same from src (tsx, vitest) and dist.
// Per download: `open` creates the file, `data` writes a batch at the file's end (all of it: a
// write may be partial), hashes it and acknowledges its size (the sender's backlog), `finish`
// fsyncs when durable, closes and answers the digest, `abort` closes and removes the file. A
// failure closes and removes the file and is answered with the error's message and code.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const sessions = new Map();
function writeAll(fd, views, position) {
  while (views.length > 0) {
    let n = fs.writevSync(fd, views, position);
    position += n;
    while (views.length > 0 && n >= views[0].byteLength) n -= views.shift().byteLength;
    if (n > 0) views[0] = views[0].subarray(n);
  }
}
function close(id, s, remove) {
  sessions.delete(id);
  try { fs.closeSync(s.fd); } catch {}
  if (remove) try { fs.unlinkSync(s.file); } catch {}
}
parentPort.on('message', (m) => {
  const s = sessions.get(m.id);
  try {
    if (m.op === 'open') {
      const fd = fs.openSync(m.file, 'wx', m.mode);
      sessions.set(m.id, { fd, file: m.file, durable: m.durable, position: 0, hash: createHash('sha256') });
    } else if (m.op === 'data') {
      let bytes = 0;
      for (const ab of m.bufs) bytes += ab.byteLength;
      if (s) {
        const views = m.bufs.map((ab) => new Uint8Array(ab));
        for (const v of views) s.hash.update(v);
        writeAll(s.fd, views, s.position);
        s.position += bytes;
      }
      parentPort.postMessage({ id: m.id, ack: bytes });
    } else if (m.op === 'finish') {
      if (!s) throw new Error('no open file for download ' + m.id);
      if (s.durable) fs.fsyncSync(s.fd);
      fs.closeSync(s.fd);
      sessions.delete(m.id);
      parentPort.postMessage({ id: m.id, sha256: s.hash.digest('hex'), bytes: s.position });
    } else if (m.op === 'abort') {
      if (s) close(m.id, s, true);
      parentPort.postMessage({ id: m.id, aborted: true });
    }
  } catch (err) {
    if (s) close(m.id, s, true);
    parentPort.postMessage({ id: m.id, error: String((err && err.message) || err), code: err && err.code });
  }
});
`;

interface WorkerReply {
  id: number;
  ack?: number;
  sha256?: string;
  bytes?: number;
  aborted?: boolean;
  error?: string;
  code?: string;
}

/** One worker thread shared by every large download; downloads are multiplexed by id. */
class SinkWorker {
  private static instance: SinkWorker | null | undefined;
  private readonly worker: Worker;
  private readonly sessions = new Map<number, (reply: WorkerReply) => void>();
  private nextId = 1;
  private broken: Error | undefined;

  /** The shared worker, or null when worker threads cannot be started (then sinks are inline). */
  static shared(): SinkWorker | null {
    if (SinkWorker.instance === undefined) {
      try {
        SinkWorker.instance = new SinkWorker();
      } catch {
        SinkWorker.instance = null;
      }
    }
    if (SinkWorker.instance?.broken) SinkWorker.instance = null;
    return SinkWorker.instance;
  }

  private constructor() {
    this.worker = new Worker(WORKER_SOURCE, { eval: true, name: 'agentd-download' });
    // Why unref: an idle worker must not keep the daemon (or a test run) alive; it is ref'd while in use.
    this.worker.unref();
    this.worker.on('message', (m: WorkerReply) => this.sessions.get(m.id)?.(m));
    const fail = (err: Error): void => {
      this.broken = err;
      for (const deliver of [...this.sessions.values()]) deliver({ id: 0, error: err.message });
      this.sessions.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`download worker exited with code ${code}`)));
  }

  /** Post a batch, transferring its buffers; copies them when the runtime refuses a transfer. */
  private post(id: number, bufs: ArrayBuffer[]): void {
    try {
      this.worker.postMessage({ op: 'data', id, bufs }, bufs);
    } catch {
      // Newer Node versions throw for buffers marked untransferable instead of cloning them.
      const copies = bufs.map((ab) => ab.slice(0));
      this.worker.postMessage({ op: 'data', id, bufs: copies }, copies);
    }
  }

  session(file: string, options: DownloadSinkOptions, maxBacklog: number): DownloadSink {
    const id = this.nextId++;
    let batch: ArrayBuffer[] = [];
    let batchBytes = 0;
    /** Bytes handed over (batched or posted) and not yet acknowledged as written. */
    let backlog = 0;
    let waiting: Array<() => void> = [];
    const errorListeners: Array<(err: Error) => void> = [];
    let failure: Error | undefined;
    /** The worker no longer knows this download (finished, failed or aborted). */
    let closed = false;
    let finished = false;
    let settle: ((reply: WorkerReply) => void) | undefined;

    const flush = (): void => {
      if (batch.length === 0) return;
      this.post(id, batch);
      batch = [];
      batchBytes = 0;
    };
    const wake = (): void => {
      const callbacks = waiting;
      waiting = [];
      for (const resume of callbacks) resume();
    };
    const release = (): void => {
      closed = true;
      this.sessions.delete(id);
      if (this.sessions.size === 0) this.worker.unref();
    };
    this.sessions.set(id, (reply) => {
      if (reply.ack !== undefined) {
        backlog -= reply.ack;
        if (backlog <= maxBacklog) wake();
        return;
      }
      release();
      if (reply.error !== undefined && !failure) {
        failure = Object.assign(new Error(`${file}: ${reply.error}`), reply.code ? { code: reply.code } : {});
        for (const listener of errorListeners) listener(failure);
        // Whoever waits for room must not hang: the next write, or finish, throws the failure.
        wake();
      }
      settle?.(reply);
    });
    this.worker.ref();
    this.worker.postMessage({ op: 'open', id, file, mode: options.mode, durable: options.durable });

    return {
      write(chunk) {
        if (failure) throw failure;
        if (chunk.length > 0) {
          const ab = ownedBuffer(chunk);
          batch.push(ab);
          batchBytes += ab.byteLength;
          backlog += ab.byteLength;
          if (batchBytes >= BATCH_BYTES) flush();
        }
        return backlog <= maxBacklog;
      },
      onRoom(resume) {
        if (failure || backlog <= maxBacklog) {
          resume();
          return;
        }
        // Why flush: only posted bytes are ever acknowledged; a held batch would wait forever.
        flush();
        waiting.push(resume);
      },
      onError(listener) {
        errorListeners.push(listener);
      },
      finish: () => {
        if (failure) return Promise.reject(failure);
        return new Promise<SinkResult>((resolve, reject) => {
          settle = (reply) => {
            if (failure) reject(failure);
            else if (reply.sha256 !== undefined) {
              finished = true;
              resolve({ sha256: reply.sha256, bytes: reply.bytes ?? 0 });
            }
          };
          flush();
          this.worker.postMessage({ op: 'finish', id });
        });
      },
      abort: () => {
        batch = [];
        waiting = [];
        // A failed download's file was removed by the worker; a finished one is still there.
        if (closed) return finished ? removeQuietly(file) : Promise.resolve();
        // Wait for the worker: it may still be about to create the file.
        return new Promise<void>((resolve) => {
          settle = () => resolve();
          this.worker.postMessage({ op: 'abort', id });
        });
      },
    };
  }
}
