import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentError } from '../../../../src/errors.js';
import type { ProgressEvent } from '../../../../src/host/types.js';
import { cacheEntryPath, ensureCached, type CacheDeps } from '../../../../src/provision/artifacts/cache.js';
import { fakeClock, startMirror, tempDirs, testDispatcher, walkFiles, type TestMirror } from './helpers.js';

/** Above the worker sink's size threshold; the tests run both sinks end to end. */
const BYTES = 20 * 1024 * 1024 + 3;
const BLOB = `/bench/blob-${BYTES}.bin`;

const dirs = tempDirs();
let mirror: TestMirror;
let dispatcher: ReturnType<typeof testDispatcher>;
let cacheDir: string;
let sha256: string;

beforeEach(async () => {
  mirror = await startMirror();
  dispatcher = testDispatcher();
  cacheDir = await dirs.make('agentd-cache-');
  sha256 = (await (await fetch(`${mirror.baseUrl}${BLOB}.sha256`)).text()).split(/\s+/)[0]!;
});

afterEach(async () => {
  await dispatcher.close();
  await mirror.close();
  await dirs.cleanup();
});

let sink: NonNullable<CacheDeps['sink']> = { where: 'inline' };

function deps(
  extra: { signal?: AbortSignal; progress?: (e: ProgressEvent) => void; retries?: number } = {},
): CacheDeps {
  return {
    ctx: {
      dispatcher,
      clock: fakeClock().clock,
      signal: extra.signal ?? new AbortController().signal,
      retry: { retries: extra.retries ?? 0, baseDelayMs: 1, maxDelayMs: 1 },
    },
    cacheDir,
    sink,
    ...(extra.progress ? { progress: extra.progress } : {}),
  };
}

const request = (): { what: string; url: string; sha256: string; task: string } => ({
  what: 'download blob 1.0.0',
  url: `${mirror.baseUrl}${BLOB}`,
  sha256,
  task: 'download blob',
});

const SINKS: Array<[string, NonNullable<CacheDeps['sink']>]> = [
  ['inline', { where: 'inline' }],
  ['on the worker', { where: 'worker' }],
  // every chunk overruns the backlog: the body pauses until the worker has caught up
  ['on the worker with a 1-byte backlog limit', { where: 'worker', maxBacklogBytes: 1 }],
];

describe.each(SINKS)('ensureCached with a large body, written and hashed %s', (_name, options) => {
  beforeEach(() => {
    sink = options;
  });

  it('streams to the digest-named entry and verifies it', async () => {
    const events: ProgressEvent[] = [];
    const got = await ensureCached(request(), deps({ progress: (e) => events.push(e) }));
    expect(got).toEqual({ path: cacheEntryPath(cacheDir, sha256), bytes: BYTES, cacheHit: false });
    const bytes = await readFile(got.path);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(sha256);
    expect(events.at(-1)).toEqual({ task: 'download blob', bytes: BYTES, totalBytes: BYTES });
    expect(await ensureCached(request(), deps())).toMatchObject({ bytes: 0, cacheHit: true });
  });

  it('a wrong expected digest is CHECKSUM_MISMATCH and leaves nothing', async () => {
    const err = (await ensureCached({ ...request(), sha256: '0'.repeat(64) }, deps()).catch(
      (e: unknown) => e,
    )) as AgentError;
    expect(err.code).toBe('CHECKSUM_MISMATCH');
    expect(err.message).toContain(BLOB);
    expect(await walkFiles(cacheDir)).toEqual([]);
  });

  it('a truncated large body is DOWNLOAD_FAILED and leaves nothing', async () => {
    mirror.faults.push({ path: BLOB, kind: 'truncate' });
    const err = (await ensureCached(request(), deps()).catch((e: unknown) => e)) as AgentError;
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(await walkFiles(cacheDir)).toEqual([]);
  });

  it('cancelling a large download in flight is CANCELLED and leaves nothing', async () => {
    mirror.faults.push({ path: BLOB, kind: 'stall' });
    const controller = new AbortController();
    const progress = (e: ProgressEvent): void => {
      if ((e.bytes ?? 0) > 0) controller.abort();
    };
    const err = (await ensureCached(request(), deps({ signal: controller.signal, progress })).catch(
      (e: unknown) => e,
    )) as AgentError;
    expect(err.code).toBe('CANCELLED');
    expect(await walkFiles(cacheDir)).toEqual([]);
    expect(await walkFiles(path.join(cacheDir, 'sha256'))).toEqual([]);
  });
});

describe('ensureCached input', () => {
  it('refuses a digest that is not 64 lowercase hex digits', async () => {
    for (const bad of ['../../etc/passwd', 'A'.repeat(64), 'abc']) {
      const err = (await ensureCached({ ...request(), sha256: bad }, deps()).catch(
        (e: unknown) => e,
      )) as AgentError;
      expect(err.code).toBe('INVALID_CONFIG');
    }
    expect(await walkFiles(cacheDir)).toEqual([]);
  });
});
