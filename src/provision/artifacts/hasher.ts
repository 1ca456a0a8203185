/**
 * SHA-256 of a download as it streams. Small files, and every file on hosts with few CPUs, are
 * hashed inline; large ones on a shared worker thread when there are cores to spare, so hashing
 * overlaps receiving and writing instead of adding to them. Measured on 2 vCPUs (bench/provision.ts):
 * there the worker's extra thread and copies cost more than they save, hence the CPU threshold.
 */
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/** A running hash. `busy` asks the producer to pause until `onIdle` fires (worker back-pressure). */
export interface StreamHasher {
  update(chunk: Buffer): void;
  readonly busy: boolean;
  /** Call `cb` once the hasher is no longer busy (at once if it is not). */
  onIdle(cb: () => void): void;
  digest(): Promise<string>;
  /** Forget the state after a failure. */
  dispose(): void;
}

/** Bodies at least this large (by Content-Length) are hashed on the worker… */
export const WORKER_HASH_MIN_BYTES = 8 * 1024 * 1024;
/** …when the host has at least this many CPUs. */
export const WORKER_HASH_MIN_CPUS = 4;
const BATCH_BYTES = 1024 * 1024;
const HIGH_WATER = 32 * 1024 * 1024;
const LOW_WATER = 8 * 1024 * 1024;

export interface StreamHasherOptions {
  /** Where to hash: `auto` (default) decides by size and CPU count; the others force it (tests, benchmarks). */
  mode?: 'auto' | 'inline' | 'worker';
}

/** A hasher for a body of `expectedBytes` (undefined when unknown). */
export function createStreamHasher(
  expectedBytes: number | undefined,
  options: StreamHasherOptions = {},
): StreamHasher {
  const mode = options.mode ?? 'auto';
  const useWorker =
    mode === 'worker' ||
    (mode === 'auto' &&
      expectedBytes !== undefined &&
      expectedBytes >= WORKER_HASH_MIN_BYTES &&
      availableParallelism() >= WORKER_HASH_MIN_CPUS);
  const worker = useWorker ? HashWorker.shared() : null;
  return worker ? worker.session() : inlineHasher();
}

function inlineHasher(): StreamHasher {
  const hash = createHash('sha256');
  return {
    update: (chunk) => {
      hash.update(chunk);
    },
    busy: false,
    onIdle: (cb) => cb(),
    digest: () => Promise.resolve(hash.digest('hex')),
    dispose: () => undefined,
  };
}

// The worker runs as an eval'd CommonJS script so it works the same from src (tsx, vitest) and dist.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const sessions = new Map();
parentPort.on('message', (m) => {
  if (m.op === 'update') {
    let h = sessions.get(m.id);
    if (!h) { h = createHash('sha256'); sessions.set(m.id, h); }
    h.update(new Uint8Array(m.data));
    parentPort.postMessage({ id: m.id, ack: m.data.byteLength });
  } else if (m.op === 'digest') {
    const h = sessions.get(m.id) || createHash('sha256');
    sessions.delete(m.id);
    parentPort.postMessage({ id: m.id, hex: h.digest('hex') });
  } else if (m.op === 'drop') {
    sessions.delete(m.id);
  }
});
`;

interface WorkerReply {
  id: number;
  ack?: number;
  hex?: string;
}

interface SessionHooks {
  ack(bytes: number): void;
  hex(hex: string): void;
  fail(err: Error): void;
}

/** One worker thread shared by every large download; sessions are multiplexed by id. */
class HashWorker {
  private static instance: HashWorker | null | undefined;
  private readonly worker: Worker;
  private readonly sessions = new Map<number, SessionHooks>();
  private nextId = 1;
  private broken: Error | undefined;

  /** The shared worker, or null when worker threads cannot be started (then hashing is inline). */
  static shared(): HashWorker | null {
    if (HashWorker.instance === undefined) {
      try {
        HashWorker.instance = new HashWorker();
      } catch {
        HashWorker.instance = null;
      }
    }
    if (HashWorker.instance?.broken) HashWorker.instance = null;
    return HashWorker.instance;
  }

  private constructor() {
    this.worker = new Worker(WORKER_SOURCE, { eval: true, name: 'agentd-sha256' });
    // Why unref: an idle worker must not keep the daemon (or a test run) alive; it is ref'd while in use.
    this.worker.unref();
    this.worker.on('message', (m: WorkerReply) => {
      const hooks = this.sessions.get(m.id);
      if (!hooks) return;
      if (m.ack !== undefined) hooks.ack(m.ack);
      if (m.hex !== undefined) hooks.hex(m.hex);
    });
    const fail = (err: Error): void => {
      this.broken = err;
      for (const hooks of this.sessions.values()) hooks.fail(err);
      this.sessions.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`sha256 worker exited with code ${code}`)));
  }

  session(): StreamHasher {
    const id = this.nextId++;
    const pending: Buffer[] = [];
    let pendingBytes = 0;
    let inFlight = 0;
    let idleWaiters: Array<() => void> = [];
    let result: { resolve: (hex: string) => void; reject: (err: Error) => void } | undefined;
    let failure: Error | undefined;

    const wakeIdle = (): void => {
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const cb of waiters) cb();
    };
    const close = (): void => {
      this.sessions.delete(id);
      if (this.sessions.size === 0) this.worker.unref();
    };
    this.sessions.set(id, {
      ack: (bytes) => {
        inFlight -= bytes;
        if (inFlight <= LOW_WATER) wakeIdle();
      },
      hex: (hex) => {
        close();
        result?.resolve(hex);
      },
      fail: (err) => {
        failure = err;
        result?.reject(err);
        wakeIdle();
      },
    });
    this.worker.ref();

    const flush = (): void => {
      if (pendingBytes === 0 || failure) return;
      // Copy into a buffer we own so it can be transferred (chunks may share a pooled ArrayBuffer).
      const data = new ArrayBuffer(pendingBytes);
      const view = new Uint8Array(data);
      let offset = 0;
      for (const chunk of pending) {
        view.set(chunk, offset);
        offset += chunk.length;
      }
      pending.length = 0;
      inFlight += pendingBytes;
      pendingBytes = 0;
      this.worker.postMessage({ op: 'update', id, data }, [data]);
    };

    return {
      update: (chunk) => {
        pending.push(chunk);
        pendingBytes += chunk.length;
        if (pendingBytes >= BATCH_BYTES) flush();
      },
      get busy() {
        return !failure && inFlight >= HIGH_WATER;
      },
      onIdle: (cb) => {
        if (failure || inFlight < HIGH_WATER) cb();
        else idleWaiters.push(cb);
      },
      digest: () => {
        if (failure) return Promise.reject(failure);
        flush();
        return new Promise<string>((resolve, reject) => {
          result = { resolve, reject };
          this.worker.postMessage({ op: 'digest', id });
        });
      },
      dispose: () => {
        if (!this.sessions.has(id)) return;
        close();
        if (!failure) this.worker.postMessage({ op: 'drop', id });
      },
    };
  }
}
