/**
 * The download worker (a worker thread; see sink.ts for why): it writes the batches of every
 * large download to its temp file and hashes them. One message protocol, typed here and used
 * by both sides. Per download: `open` creates the file, `data` writes a batch at the file's end
 * (all of it: a write may be partial), hashes it and acknowledges its size (the sender's
 * backlog), `finish` fsyncs when durable, closes and answers the digest, `abort` closes and
 * removes the file. A failure closes and removes the file and is answered with the error's
 * message and code.
 */
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { MessagePort } from 'node:worker_threads';

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
  position: number;
  hash: Hash;
}

/** Write every byte of `views` at `position` (writev may write part of them). */
function writeAll(fd: number, views: Uint8Array[], position: number): void {
  let rest = views;
  let at = position;
  while (rest.length > 0) {
    let n = fs.writevSync(fd, rest, at);
    at += n;
    const next: Uint8Array[] = [];
    for (const v of rest) {
      if (n >= v.byteLength) n -= v.byteLength;
      else {
        next.push(n > 0 ? v.subarray(n) : v);
        n = 0;
      }
    }
    rest = next;
  }
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
          });
          break;
        }
        case 'data': {
          let bytes = 0;
          for (const ab of m.bufs) bytes += ab.byteLength;
          if (s) {
            const views = m.bufs.map((ab) => new Uint8Array(ab));
            for (const v of views) s.hash.update(v);
            writeAll(s.fd, views, s.position);
            s.position += bytes;
          }
          reply({ id: m.id, ack: bytes });
          break;
        }
        case 'finish': {
          if (!s) throw new Error(`no open file for download ${m.id}`);
          if (s.durable) fs.fsyncSync(s.fd);
          fs.closeSync(s.fd);
          sessions.delete(m.id);
          reply({ id: m.id, sha256: s.hash.digest('hex'), bytes: s.position });
          break;
        }
        case 'abort': {
          if (s) close(m.id, s, true);
          reply({ id: m.id, aborted: true });
          break;
        }
      }
    } catch (err) {
      if (s) close(m.id, s, true);
      const e = err as NodeJS.ErrnoException;
      reply({ id: m.id, error: e.message, ...(typeof e.code === 'string' ? { code: e.code } : {}) });
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
