/**
 * Where a download's bytes go: a temp file, written and SHA-256-hashed as the chunks arrive.
 *
 * Small bodies, bodies of unknown size, single-CPU hosts and injected writers (a test seam) use
 * the inline sink: a write stream on this thread, hashed chunk by chunk. Large bodies go to the
 * worker sink: each received chunk is handed to a shared worker thread by transferring its
 * memory (no copy), and the worker hashes it while libuv's thread pool writes it to the file
 * (sink-worker.ts). The download thread then does nothing per chunk but receive it, which is what
 * lets a 2-CPU host keep up with curl while also hashing every byte.
 *
 * Measured on 2 vCPUs (bench/provision.ts, 256 MiB against curl, median of paired rounds), on an
 * AMD EPYC VM: hashing inline 0.49–0.71; writing on this thread and hashing on the worker, by
 * reading the file back 0.52–0.99 (median 0.89), by transferred chunks ~0.8; writing and hashing
 * on the worker ~1.0. On a Xeon VM whose curl is much faster, the worker writing and hashing one
 * after the other 0.56–0.58, overlapped 0.62–0.64 (docs/benchmarks.md). Transferring also frees
 * each 64 KiB socket buffer on this thread at once instead of leaving 4,096 of them per 256 MiB
 * to the garbage collector.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { isSea } from 'node:sea';
import { fileURLToPath } from 'node:url';
import type { Writable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { runningExecutableFiles } from '../../embedded.js';
import { defaultOpenWrite, destroyQuietly, endWritable, openForWrite, removeQuietly } from './file-io.js';
import { SINK_WORKER_DATA } from './sink-worker.js';
import type { SinkReply, SinkRequest } from './sink-worker.js';
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

/** The code of the process warning printed when the download worker cannot be started. */
export const DOWNLOAD_WORKER_UNAVAILABLE = 'AGENTD_DOWNLOAD_WORKER_UNAVAILABLE';

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
/**
 * How long the worker may sit with no download before it is ended. An idle worker keeps its
 * isolate, and with it the socket buffers it was handed, until its own collector runs, which in
 * an idle thread may be never: on a real host, ~40 MiB of the C heap stayed resident after an
 * update (docs/benchmarks.md, "Footprint on a real host", and that file's history). Long enough to keep one
 * worker through an update's back-to-back downloads.
 */
export const WORKER_IDLE_MS = 5_000;

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
/** The download worker's thread id while one runs, else null (tests and diagnostics). */
export function downloadWorkerThreadId(): number | null {
  return SinkWorker.threadId();
}

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

/**
 * The worker thread running sink-worker, from the first of:
 * - the module next to this one: tsc's dist/ (`sink-worker.js`), or the esbuild bundle's own file
 *   next to agentd's bundle (`dist/sink-worker.cjs`, scripts/build.ts: `npm start`, the npm bins);
 * - the release executable's embedded file `sink-worker.cjs` (the same file, src/embedded.ts),
 *   evaluated as the worker's script;
 * - run from the TypeScript sources (vitest, tsx), the same module through tsx's loader,
 *   registered in the worker first (a worker does not inherit the loader of the thread that
 *   starts it).
 * None of them (a bundle copied without its worker file): large downloads are hashed inline.
 */
function startSinkWorker(): Worker {
  const options = { name: 'agentd-download', workerData: SINK_WORKER_DATA };
  for (const name of ['./sink-worker.js', './sink-worker.cjs']) {
    const file = new URL(name, import.meta.url);
    if (existsSync(fileURLToPath(file))) return new Worker(file, options);
  }
  if (isSea()) {
    // Throws when the executable carries no such file: then large downloads hash inline.
    const source = runningExecutableFiles()?.read('sink-worker.cjs');
    if (!source) throw new Error('the executable carries no sink-worker.cjs');
    return new Worker(source.toString('utf8'), { ...options, eval: true });
  }
  const tsUrl = new URL('./sink-worker.ts', import.meta.url);
  if (!existsSync(fileURLToPath(tsUrl))) throw new Error('no download worker module next to the sink');
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(tsUrl.href)}); });`;
  return new Worker(boot, { ...options, eval: true });
}

/** One worker thread shared by every large download; downloads are multiplexed by id. */
class SinkWorker {
  private static instance: SinkWorker | null | undefined;
  private readonly worker: Worker;
  private readonly sessions = new Map<number, (reply: SinkReply) => void>();
  private nextId = 1;
  private broken: Error | undefined;
  /** Ended for being idle: its exit is no failure, and it takes no new download. */
  private retired = false;
  private idleTimer: NodeJS.Timeout | undefined;

  /** The worker thread's id while one runs (tests, diagnostics); null when there is none. */
  static threadId(): number | null {
    return SinkWorker.instance ? SinkWorker.instance.worker.threadId : null;
  }

  /** The shared worker, or null when worker threads cannot be started (then sinks are inline). */
  static shared(): SinkWorker | null {
    if (SinkWorker.instance === undefined) {
      try {
        SinkWorker.instance = new SinkWorker();
      } catch (err) {
        SinkWorker.instance = null;
        // Once per process, on stderr (the journal): downloads still work, only slower.
        process.emitWarning(
          `the download worker cannot start (${err instanceof Error ? err.message : String(err)}): large downloads are hashed on the main thread`,
          { code: DOWNLOAD_WORKER_UNAVAILABLE },
        );
      }
    }
    if (SinkWorker.instance?.broken) SinkWorker.instance = null;
    return SinkWorker.instance;
  }

  private constructor() {
    this.worker = startSinkWorker();
    // Why unref: an idle worker must not keep the daemon (or a test run) alive; it is ref'd while in use.
    this.worker.unref();
    this.worker.on('message', (m: SinkReply) => this.sessions.get(m.id)?.(m));
    const fail = (err: Error): void => {
      this.broken = err;
      for (const deliver of [...this.sessions.values()]) deliver({ id: 0, error: err.message });
      this.sessions.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => {
      if (!this.retired) fail(new Error(`download worker exited with code ${code}`));
    });
  }

  /** No download left: end the worker once it has been idle for WORKER_IDLE_MS (see there). */
  private idle(): void {
    clearTimeout(this.idleTimer);
    // A process-wide resource, not a step of any operation: a plain timer, unref'd so it never
    // keeps the process alive, rather than an operation's clock.
    this.idleTimer = setTimeout(() => {
      if (this.sessions.size > 0) return;
      this.retired = true;
      if (SinkWorker.instance === this) SinkWorker.instance = undefined;
      void this.worker.terminate();
    }, WORKER_IDLE_MS);
    this.idleTimer.unref();
  }

  private send(request: SinkRequest): void {
    this.worker.postMessage(request);
  }

  /** Post a batch, transferring its buffers; copies them when the runtime refuses a transfer. */
  private post(id: number, bufs: ArrayBuffer[]): void {
    try {
      this.worker.postMessage({ op: 'data', id, bufs } satisfies SinkRequest, bufs);
    } catch {
      // Newer Node versions throw for buffers marked untransferable instead of cloning them.
      const copies = bufs.map((ab) => ab.slice(0));
      this.worker.postMessage({ op: 'data', id, bufs: copies } satisfies SinkRequest, copies);
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
    let settle: ((reply: SinkReply) => void) | undefined;

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
      if (this.sessions.size === 0) {
        this.worker.unref();
        this.idle();
      }
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
    clearTimeout(this.idleTimer);
    this.worker.ref();
    this.send({ op: 'open', id, file, mode: options.mode, durable: options.durable });

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
          this.send({ op: 'finish', id });
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
          this.send({ op: 'abort', id });
        });
      },
    };
  }
}
