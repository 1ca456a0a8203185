/**
 * Downloads are bounded (docs/operations.md, "Limits"): a body longer than its declared or
 * expected size fails at once, a body slower than the rate floor fails at the end of its window,
 * and a call that never answers fails at its deadline. Time is the test's clock: nothing sleeps.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentError } from '../../../../src/errors.js';
import { ensureCached, type CacheDeps } from '../../../../src/provision/artifacts/cache.js';
import type { ProgressEvent } from '../../../../src/host/types.js';
import { createManualClock, settle, type ManualClock } from '../../../support/manual-clock.js';
import { tempDirs, testDispatcher, walkFiles } from './helpers.js';

type Behaviour = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface Server {
  url: string;
  /** Bytes the server wrote into bodies. */
  written: () => number;
  close(): Promise<void>;
}

async function serve(behaviour: Behaviour): Promise<Server> {
  let written = 0;
  const server = http.createServer((req, res) => {
    const write = res.write.bind(res);
    res.write = ((chunk: Buffer, ...rest: never[]) => {
      written += chunk.length;
      return write(chunk, ...rest);
    }) as typeof res.write;
    behaviour(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/kubelet`,
    written: () => written,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A GET body that never ends (no Content-Length); the HEAD says `headBytes` when given. */
function endless(headBytes?: number): Behaviour {
  return (req, res) => {
    if (req.method === 'HEAD') {
      res.writeHead(200, headBytes === undefined ? {} : { 'content-length': headBytes }).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const chunk = Buffer.alloc(64 * 1024, 7);
    const pump = (): void => {
      while (!res.destroyed && res.write(chunk));
      if (!res.destroyed) res.once('drain', pump);
    };
    pump();
  };
}

const SHA = 'a'.repeat(64);

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
const dirs = tempDirs();
let dispatcher: ReturnType<typeof testDispatcher>;
let clock: ManualClock;
let cacheDir: string;
let server: Server | undefined;

beforeEach(async () => {
  dispatcher = testDispatcher();
  clock = createManualClock();
  cacheDir = await dirs.make('agentd-bounds-');
});

afterEach(async () => {
  await server?.close();
  server = undefined;
  await dispatcher.close();
  await dirs.cleanup();
});

function deps(extra: Partial<CacheDeps> = {}): CacheDeps {
  return {
    ctx: {
      dispatcher,
      clock,
      boundsClock: clock,
      signal: new AbortController().signal,
      retry: { retries: 0, baseDelayMs: 1, maxDelayMs: 1 },
    },
    cacheDir,
    sink: { where: 'inline' },
    ...extra,
  };
}

const request = (url: string) => ({
  what: 'download kubelet 1.34.0',
  url,
  sha256: SHA,
  task: 'download kubelet',
});

/** Resolves with the rejection of `p`, and fails when `p` resolves. */
async function rejection(p: Promise<unknown>): Promise<AgentError> {
  return p.then(
    () => {
      throw new Error('expected the download to fail');
    },
    (err: unknown) => err as AgentError,
  );
}

describe('a download longer than it may be', () => {
  it('fails at once when the body passes the size its HEAD declares, naming URL, bytes and limit', async () => {
    server = await serve(endless(826));
    const err = await rejection(ensureCached(request(server.url), deps()));
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.data).toMatchObject({ url: server.url, limitBytes: 826 });
    expect((err.data as { receivedBytes: number }).receivedBytes).toBeGreaterThan(826);
    expect(err.message).toContain(server.url);
    expect(err.message).toMatch(/received \d+ bytes, more than its limit of 826 bytes/);
    // Nothing was kept, and the server was cut off long before the disk could fill.
    expect(await walkFiles(cacheDir)).toEqual([]);
    expect(server.written()).toBeLessThan(64 * 1024 * 1024);
  });

  it('fails when a body of no declared size passes the cap', async () => {
    server = await serve(endless());
    const err = await rejection(ensureCached(request(server.url), deps({ maxBytes: 1024 * 1024 })));
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.data).toMatchObject({ url: server.url, limitBytes: 1024 * 1024 });
    expect(await walkFiles(cacheDir)).toEqual([]);
  });
});

describe('a download slower than the floor', () => {
  it('fails at the end of the rate window, naming URL, bytes received and the floor', async () => {
    // Content-Length 826, then one byte and nothing more: a trickle.
    server = await serve((req, res) => {
      res.writeHead(200, { 'content-length': 826 });
      if (req.method === 'GET') res.write(Buffer.from('x'));
      else res.end();
    });
    const firstByte = deferred();
    const progress = (e: ProgressEvent): void => {
      if ((e.bytes ?? 0) > 0) firstByte.resolve();
    };
    let settled = false;
    const download = ensureCached(request(server.url), deps({ progress })).finally(() => {
      settled = true;
    });
    const failed = rejection(download);
    await firstByte.promise;
    await clock.advance(59_000);
    await settle(10);
    expect(settled).toBe(false);
    await clock.advance(1_000);
    const err = await failed;
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.data).toMatchObject({
      url: server.url,
      receivedBytes: 1,
      minRateBytesPerSecond: 10 * 1024,
      rateWindowMs: 60_000,
    });
    expect(err.message).toContain(server.url);
    expect(err.message).toMatch(
      /too slow, 1 bytes in the last 1m .*below the floor of 10KiB\/s averaged over 1m/,
    );
    expect(await walkFiles(cacheDir)).toEqual([]);
  });

  it('takes the floor and window it is given', async () => {
    server = await serve((req, res) => {
      res.writeHead(200, { 'content-length': 100_000 });
      if (req.method === 'GET') res.write(Buffer.alloc(500));
      else res.end();
    });
    const firstByte = deferred();
    const d = deps({ progress: () => firstByte.resolve() });
    d.ctx.limits = { minRateBytesPerSecond: 100, rateWindowMs: 10_000, requestTimeoutMs: 120_000 };
    const failed = rejection(ensureCached(request(server.url), d));
    await firstByte.promise;
    // 500 bytes in 5 s is 100 B/s: the first window's judgement is made at 10 s, not before.
    await clock.advance(10_000);
    const err = await failed;
    expect(err.data).toMatchObject({ receivedBytes: 500, minRateBytesPerSecond: 100, rateWindowMs: 10_000 });
  });
});

describe('a call that never answers', () => {
  it('fails at its deadline, naming URL and deadline', async () => {
    const seen = deferred();
    server = await serve(() => seen.resolve()); // never answers
    let settled = false;
    const failed = rejection(
      ensureCached(request(server.url), deps()).finally(() => {
        settled = true;
      }),
    );
    await seen.promise;
    await clock.advance(119_000);
    await settle(10);
    expect(settled).toBe(false);
    await clock.advance(1_000);
    const err = await failed;
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.data).toMatchObject({ url: server.url, receivedBytes: 0, deadlineMs: 120_000 });
    expect(err.message).toMatch(/not done after 2m \(received 0 bytes\), past its deadline of 2m/);
  });
});
