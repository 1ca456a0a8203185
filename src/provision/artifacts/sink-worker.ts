/**
 * The download worker (a worker thread; see sink.ts for why): it writes the batches of every
 * large download to its temp file and hashes them. One message protocol, typed here and used
 * by both sides. Per download: `open` creates the file, `data` starts writing a batch at its
 * offset on libuv's thread pool (all of it: a write may be partial), hashes it on this thread
 * meanwhile, and acknowledges its size once it is written (the sender's backlog), `finish` waits
 * for the writes in flight, fsyncs when durable, closes and answers the digest, `abort` waits
 * for them, closes and removes the file. A failure (a write's, or an open's) closes and removes
 * the file once no write of it is in flight, and is answered with the error's message and code.
 *
 * Why the write is not on this thread: the hash is the longest part of a download's CPU (SHA-256
 * of 256 MiB: ~220 ms on one core of a 2-CPU Xeon, the page-cache write ~60 ms), and the two
 * need not wait for each other. Overlapped, a 256 MiB download went from 0.56–0.58 to 0.62–0.64
 * of curl's throughput on that machine (docs/benchmarks.md, "Provisioning").
 */
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { MessagePort } from 'node:worker_threads';
import { unwritten } from '../unwritten.js';

/** The `workerData` that makes this module serve when it is loaded as a worker. */
export const SINK_WORKER_DATA = { agentdSinkWorker: true } as const;

/** Messages to the worker. */
export type SinkRequest =
  | { op: 'open'; id: number; file: string; mode: number; durable: boolean }
  | { op: 'data'; id: number; bufs: ArrayBuffer[] }
  | { op: 'finish'; id: number }
  | { op: 'abort'; id: number };

/** Messages from the worker (`id` 0: the worker itself failed). */
export interface SinkReply {
  id: number;
  ack?: number;
  sha256?: string;
  bytes?: number;
  aborted?: boolean;
  error?: string;
  code?: string;
}

interface Session {
  fd: number;
  file: string;
  durable: boolean;
  /** Where the next batch goes: the bytes handed over so far. */
  position: number;
  hash: Hash;
  /** Writes started and not yet ended: the file is not closed while one is in flight. */
  writing: number;
  /** The first write that failed: the download fails with it once no write is in flight. */
  failed?: NodeJS.ErrnoException;
  /** `finish` or `abort`, held until no write is in flight. */
  afterWrites?: () => void;
}

/** Write every byte of `views` at `position` on the thread pool (writev may write part of them). */
function writeAll(
  fd: number,
  views: Uint8Array[],
  position: number,
  done: (err: NodeJS.ErrnoException | null) => void,
): void {
  fs.writev(fd, views, position, (err, n) => {
    if (err) return done(err);
    const rest = unwritten(views, n);
    if (rest.length === 0) return done(null);
    // Why a check: a write that takes no byte of a non-empty batch would loop here forever.
    if (n === 0) return done(Object.assign(new Error('the file took no byte of a write'), { code: 'EIO' }));
    writeAll(fd, rest, position + n, done);
  });
}

/** Answer the requests arriving on `port` (the worker's side of the protocol). */
export function serveSinkRequests(port: Pick<MessagePort, 'on' | 'postMessage'>): void {
  const sessions = new Map<number, Session>();
  const close = (id: number, s: Session, remove: boolean): void => {
    sessions.delete(id);
    try {
      fs.closeSync(s.fd);
    } catch {
      // already closed: nothing left to release
    }
    if (remove) fs.rmSync(s.file, { force: true });
  };
  const reply = (r: SinkReply): void => port.postMessage(r);
  const fail = (id: number, s: Session | undefined, err: NodeJS.ErrnoException): void => {
    if (s) close(id, s, true);
    reply({ id, error: err.message, ...(typeof err.code === 'string' ? { code: err.code } : {}) });
  };
  /** No write of `s` in flight: answer its failure, or run what waited for its writes. */
  const written = (id: number, s: Session): void => {
    if (s.failed) fail(id, s, s.failed);
    else {
      const next = s.afterWrites;
      s.afterWrites = undefined;
      next?.();
    }
  };
  /** Run `step` once no write of `s` is in flight (a failure answers instead). */
  const whenWritten = (id: number, s: Session, step: () => void): void => {
    s.afterWrites = step;
    if (s.writing === 0) written(id, s);
  };
  port.on('message', (m: SinkRequest) => {
    const s = sessions.get(m.id);
    try {
      switch (m.op) {
        case 'open': {
          const fd = fs.openSync(m.file, 'wx', m.mode);
          sessions.set(m.id, {
            fd,
            file: m.file,
            durable: m.durable,
            position: 0,
            hash: createHash('sha256'),
            writing: 0,
          });
          break;
        }
        case 'data': {
          let bytes = 0;
          for (const ab of m.bufs) bytes += ab.byteLength;
          // A download that failed (or ended) only has its bytes acknowledged.
          if (!s || s.failed) {
            reply({ id: m.id, ack: bytes });
            break;
          }
          const views = m.bufs.map((ab) => new Uint8Array(ab));
          s.writing++;
          writeAll(s.fd, views, s.position, (err) => {
            s.writing--;
            if (err) s.failed ??= err;
            reply({ id: m.id, ack: bytes });
            if (s.writing === 0 && (s.failed || s.afterWrites)) written(m.id, s);
          });
          s.position += bytes;
          for (const v of views) s.hash.update(v);
          break;
        }
        case 'finish': {
          if (!s) throw new Error(`no open file for download ${m.id}`);
          whenWritten(m.id, s, () => {
            try {
              if (s.durable) fs.fsyncSync(s.fd);
              fs.closeSync(s.fd);
            } catch (err) {
              fail(m.id, s, err as NodeJS.ErrnoException);
              return;
            }
            sessions.delete(m.id);
            reply({ id: m.id, sha256: s.hash.digest('hex'), bytes: s.position });
          });
          break;
        }
        case 'abort': {
          if (!s) reply({ id: m.id, aborted: true });
          else
            whenWritten(m.id, s, () => {
              close(m.id, s, true);
              reply({ id: m.id, aborted: true });
            });
          break;
        }
      }
    } catch (err) {
      // Thrown on this thread (an open, a finish without a file): no write of it is in flight
      // unless a write started before, in which case it fails once they have ended.
      if (s && s.writing > 0) s.failed ??= err as NodeJS.ErrnoException;
      else fail(m.id, s, err as NodeJS.ErrnoException);
    }
  });
}

// Loaded as the download worker: serve. Imported anywhere else (sink.ts, tests): only exports.
if (
  !isMainThread &&
  parentPort !== null &&
  (workerData as typeof SINK_WORKER_DATA | null)?.agentdSinkWorker
) {
  serveSinkRequests(parentPort);
}
