import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createDownloadSink,
  downloadWorkerThreadId,
  MAX_BACKLOG_BYTES,
  WORKER_IDLE_MS,
  WORKER_SINK_MIN_BYTES,
  type DownloadSink,
  type DownloadSinkOptions,
} from '../../../../src/provision/artifacts/sink.js';
import {
  serveSinkRequests,
  type SinkReply,
  type SinkRequest,
} from '../../../../src/provision/artifacts/sink-worker.js';

const data = randomBytes(WORKER_SINK_MIN_BYTES + 3 * 1024 * 1024 + 17);
const want = createHash('sha256').update(data).digest('hex');
const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-sink-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Uneven chunks of `bytes`: views into it, or (`own`) copies that each own their ArrayBuffer. */
function chunksOf(bytes: Buffer, own: boolean): Buffer[] {
  const chunks: Buffer[] = [];
  for (let offset = 0, i = 0; offset < bytes.length; i++) {
    const view = bytes.subarray(offset, offset + 1000 + ((i * 7919) % 70_000));
    chunks.push(own ? Buffer.from(view) : view);
    offset += view.length;
  }
  return chunks;
}

const sinkFor = (name: string, options: Partial<DownloadSinkOptions> = {}): DownloadSink =>
  createDownloadSink(path.join(dir, name), {
    expectedBytes: undefined,
    mode: 0o640,
    durable: false,
    ...options,
  });

/** Do what the downloader does: hand over each chunk, pausing while there is no room, then finish. */
async function feed(sink: DownloadSink, chunks: Buffer[]) {
  for (const chunk of chunks) {
    if (!sink.write(chunk)) await new Promise<void>((resume) => sink.onRoom(resume));
  }
  return sink.finish();
}

describe('createDownloadSink', () => {
  it('writes and hashes the same on this thread and on the worker', async () => {
    const cases: Array<[string, Partial<DownloadSinkOptions>, boolean]> = [
      ['unsized', {}, false],
      ['auto', { expectedBytes: data.length }, true],
      ['inline', { expectedBytes: data.length, where: 'inline' }, true],
      ['worker', { expectedBytes: 1024, where: 'worker', durable: true }, false],
    ];
    for (const [name, options, own] of cases) {
      expect(await feed(sinkFor(name, options), chunksOf(data, own))).toEqual({
        sha256: want,
        bytes: data.length,
      });
      expect((await readFile(path.join(dir, name))).equals(data)).toBe(true);
      expect((await stat(path.join(dir, name))).mode & 0o777).toBe(0o640);
    }
  });

  it('ends the worker once it has had no download for a while, and starts another for the next', async () => {
    const download = async (name: string) => {
      expect(await feed(sinkFor(name, { where: 'worker' }), chunksOf(data, true))).toEqual({
        sha256: want,
        bytes: data.length,
      });
      expect((await readFile(path.join(dir, name))).equals(data)).toBe(true);
      return downloadWorkerThreadId();
    };
    const first = await download('first');
    expect(first).not.toBeNull();
    // The next download within the idle time keeps the same worker.
    expect(await download('second')).toBe(first);
    const deadline = Date.now() + WORKER_IDLE_MS + 5_000;
    while (downloadWorkerThreadId() !== null && Date.now() < deadline) await delay(100);
    expect(downloadWorkerThreadId()).toBeNull();
    const next = await download('third');
    expect(next).not.toBeNull();
    expect(next).not.toBe(first);
  }, 20_000);

  it('takes over chunks that own their buffer and copies views of larger ones', async () => {
    const owned = Buffer.from(data.subarray(0, 100_000));
    const view = data.subarray(100_000, 200_000);
    const result = await feed(sinkFor('taken', { where: 'worker' }), [owned, view]);
    expect(result).toEqual({ sha256: sha256(data.subarray(0, 200_000)), bytes: 200_000 });
    expect(owned.length).toBe(0); // transferred to the worker: detached here
    expect(view.length).toBe(100_000); // copied: the caller's larger buffer is untouched
  });

  it('the worker writes an empty body and a small one', async () => {
    expect(await feed(sinkFor('empty', { where: 'worker' }), [])).toEqual({
      sha256: sha256(Buffer.alloc(0)),
      bytes: 0,
    });
    expect(await readFile(path.join(dir, 'empty'))).toHaveLength(0);
    const small = randomBytes(100);
    const expected = sha256(small); // before the sink takes `small` over
    expect(await feed(sinkFor('small', { where: 'worker' }), [Buffer.alloc(0), small])).toEqual({
      sha256: expected,
      bytes: 100,
    });
  });

  it('keeps concurrent downloads on the worker apart', async () => {
    const other = randomBytes(WORKER_SINK_MIN_BYTES + 1);
    const otherSha = sha256(other);
    const [a, b] = await Promise.all([
      feed(sinkFor('a', { where: 'worker' }), chunksOf(data, true)),
      feed(sinkFor('b', { where: 'worker' }), chunksOf(other, false)),
    ]);
    expect(a.sha256).toBe(want);
    expect(b.sha256).toBe(otherSha);
    expect((await readFile(path.join(dir, 'b'))).equals(other)).toBe(true);
  });

  it('asks for a pause beyond the backlog limit and calls back once the worker has caught up', async () => {
    const block = randomBytes(1024 * 1024);
    const blocks = MAX_BACKLOG_BYTES / block.length + 8;
    const sink = sinkFor('backlog', { where: 'worker' });
    const whole = createHash('sha256');
    let refused = false;
    // No turn of the event loop between the blocks: the worker's acknowledgements cannot arrive.
    for (let i = 0; i < blocks; i++) {
      refused = !sink.write(Buffer.from(block)) || refused;
      whole.update(block);
    }
    expect(refused).toBe(true);
    await new Promise<void>((resume) => sink.onRoom(resume));
    expect(sink.write(Buffer.alloc(0))).toBe(true);
    expect(await sink.finish()).toEqual({ sha256: whole.digest('hex'), bytes: blocks * block.length });
  });

  it('a backlog smaller than one batch is posted, so waiting for room cannot hang', async () => {
    const sink = sinkFor('tiny-backlog', { where: 'worker', maxBacklogBytes: 1 });
    const chunk = randomBytes(3000);
    const expected = sha256(chunk);
    expect(sink.write(chunk)).toBe(false);
    await new Promise<void>((resume) => sink.onRoom(resume));
    expect((await sink.finish()).sha256).toBe(expected);
  });

  it('an existing file fails the download on both sinks and is left alone', async () => {
    await writeFile(path.join(dir, 'taken'), 'not ours');
    for (const where of ['inline', 'worker'] as const) {
      const sink = sinkFor('taken', { where });
      const failed = new Promise<Error>((resolve) => sink.onError(resolve));
      expect((await failed).message).toMatch(/EEXIST/);
      expect(() => sink.write(Buffer.from('x'))).toThrow(/EEXIST/);
      await expect(sink.finish()).rejects.toThrow(/EEXIST/);
      await sink.abort();
      expect(await readFile(path.join(dir, 'taken'), 'utf8')).toBe('not ours');
    }
  });

  it('abort removes the file, before or after finishing, and the worker goes on serving', async () => {
    const early = sinkFor('early', { where: 'worker' });
    early.write(Buffer.from(data.subarray(0, 5_000_000)));
    await early.abort();
    await early.abort();
    const late = sinkFor('late', { where: 'worker' });
    await feed(late, [Buffer.from('abc')]);
    await late.abort();
    expect(await readdir(dir)).toEqual([]);
    expect((await feed(sinkFor('after', { where: 'worker' }), chunksOf(data, true))).sha256).toBe(want);
  });

  it('a write failing part-way (file size limit) fails the download with its code and removes the file', async () => {
    const child = fileURLToPath(new URL('../../../support/sink-child.ts', import.meta.url));
    const file = path.join(dir, 'limited');
    // RLIMIT_FSIZE: writes past 1 MiB fail with EFBIG (Node ignores SIGXFSZ), as ENOSPC would on a full disk.
    const run = await execa('prlimit', [
      '--fsize=1048576',
      process.execPath,
      '--import',
      'tsx',
      child,
      file,
      String(WORKER_SINK_MIN_BYTES),
    ]);
    expect(JSON.parse(run.stdout)).toEqual({
      error: expect.stringMatching(/^.*limited: EFBIG: file too large/),
      code: 'EFBIG',
      fileLeft: false,
    });
  });
});

describe('the download worker', () => {
  /** The worker's side in this thread: requests go in synchronously, replies are collected. */
  function serve() {
    let handler: ((m: SinkRequest) => void) | undefined;
    const replies: SinkReply[] = [];
    let onReply = (): void => {};
    serveSinkRequests({
      on: ((_event: string, fn: (m: SinkRequest) => void) => {
        handler = fn;
      }) as never,
      postMessage: (r: SinkReply) => {
        replies.push(r);
        onReply();
      },
    });
    const send = (m: SinkRequest): void => handler?.(m);
    /** The reply that ends download `id` (anything but an acknowledgement). */
    const ended = (id: number): Promise<SinkReply> =>
      new Promise((resolve) => {
        const check = (): void => {
          const end = replies.find((r) => r.id === id && r.ack === undefined);
          if (end) resolve(end);
        };
        onReply = check;
        check();
      });
    return { send, replies, ended };
  }
  /** `data` cut into batches of 1 MiB, each its own ArrayBuffer (as the sender transfers them). */
  const batches = (): ArrayBuffer[][] =>
    chunksOf(data, false).reduce<ArrayBuffer[][]>((all, chunk) => {
      const last = all.at(-1);
      const ab = new Uint8Array(chunk).buffer;
      if (last && last.reduce((n, b) => n + b.byteLength, 0) < 1024 * 1024) last.push(ab);
      else all.push([ab]);
      return all;
    }, []);

  it('finishes only once the writes in flight have ended: the digest and the file are whole', async () => {
    const { send, replies, ended } = serve();
    const file = path.join(dir, 'at-once');
    // Every request in one go: the finish arrives while the batches are still being written.
    send({ op: 'open', id: 1, file, mode: 0o600, durable: true });
    for (const bufs of batches()) send({ op: 'data', id: 1, bufs });
    send({ op: 'finish', id: 1 });
    expect(await ended(1)).toEqual({ id: 1, sha256: want, bytes: data.length });
    expect(replies.reduce((n, r) => n + (r.ack ?? 0), 0)).toBe(data.length);
    expect((await readFile(file)).equals(data)).toBe(true);
  });

  it('aborts only once the writes in flight have ended, and leaves no file', async () => {
    const { send, replies, ended } = serve();
    const file = path.join(dir, 'aborted');
    send({ op: 'open', id: 2, file, mode: 0o600, durable: false });
    for (const bufs of batches()) send({ op: 'data', id: 2, bufs });
    send({ op: 'abort', id: 2 });
    expect(await ended(2)).toEqual({ id: 2, aborted: true });
    expect(replies.filter((r) => r.error !== undefined)).toEqual([]);
    expect(await readdir(dir)).toEqual([]);
  });
});
