import { createHash, randomBytes } from 'node:crypto';
import { open, writeFile, appendFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createStreamHasher, WORKER_HASH_MIN_BYTES } from '../../../../src/provision/artifacts/hasher.js';

const data = randomBytes(WORKER_HASH_MIN_BYTES + 3 * 1024 * 1024 + 17);
const want = createHash('sha256').update(data).digest('hex');

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-hasher-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * Do what the downloader does: each uneven chunk is shown to the hasher, appended to the file,
 * and reported written; then the file is closed and the digest asked for.
 */
async function feed(
  expected: number | undefined,
  mode: 'auto' | 'inline' | 'worker',
  bytes: Buffer = data,
  name = 'out.partial',
): Promise<string> {
  const file = path.join(dir, name);
  const hasher = createStreamHasher(expected, { mode, file });
  const fh = await open(file, 'wx');
  try {
    for (let offset = 0, i = 0; offset < bytes.length; i++) {
      const chunk = bytes.subarray(offset, offset + 1000 + ((i * 7919) % 70_000));
      hasher.update(chunk);
      await fh.write(chunk);
      hasher.written(chunk.length);
      offset += chunk.length;
    }
  } finally {
    await fh.close();
  }
  return hasher.digest();
}

describe('createStreamHasher', () => {
  it('hashes inline and on the worker with the same result', async () => {
    expect(await feed(undefined, 'auto', data, 'a')).toBe(want);
    expect(await feed(data.length, 'auto', data, 'b')).toBe(want);
    expect(await feed(data.length, 'inline', data, 'c')).toBe(want);
    expect(await feed(1024, 'worker', data, 'd')).toBe(want);
  });

  it('the worker hashes an empty file and a small one', async () => {
    expect(await feed(0, 'worker', Buffer.alloc(0))).toBe(createHash('sha256').digest('hex'));
    const small = randomBytes(100);
    expect(await feed(100, 'worker', small, 'small')).toBe(createHash('sha256').update(small).digest('hex'));
  });

  it('keeps concurrent worker sessions apart', async () => {
    const other = randomBytes(WORKER_HASH_MIN_BYTES + 1);
    const [a, b] = await Promise.all([
      feed(data.length, 'worker', data, 'a'),
      feed(other.length, 'worker', other, 'b'),
    ]);
    expect(a).toBe(want);
    expect(b).toBe(createHash('sha256').update(other).digest('hex'));
  });

  it('the worker digest is of the bytes in the file, not of the chunks it was shown', async () => {
    const file = path.join(dir, 'tampered');
    const hasher = createStreamHasher(data.length, { mode: 'worker', file });
    const altered = Buffer.from(data);
    altered.writeUInt8(altered.readUInt8(12345) ^ 0xff, 12345);
    await writeFile(file, altered);
    hasher.update(data);
    hasher.written(data.length);
    expect(await hasher.digest()).toBe(createHash('sha256').update(altered).digest('hex'));
  });

  it('a file shorter or longer than the bytes reported written fails the digest', async () => {
    const short = path.join(dir, 'short');
    const h1 = createStreamHasher(1000, { mode: 'worker', file: short });
    await writeFile(short, Buffer.alloc(500));
    h1.written(1000);
    await expect(h1.digest()).rejects.toThrow(/ends at byte 500, but 1000 were written/);

    const long = path.join(dir, 'long');
    const h2 = createStreamHasher(1000, { mode: 'worker', file: long });
    await writeFile(long, Buffer.alloc(1000));
    await appendFile(long, 'x');
    h2.written(1000);
    await expect(h2.digest()).rejects.toThrow(/holds more than the 1000 bytes written/);
  });

  it('a missing file fails the digest with the file named', async () => {
    const file = path.join(dir, 'never-written');
    const hasher = createStreamHasher(10, { mode: 'worker', file });
    await expect(hasher.digest()).rejects.toThrow(/never-written/);
  });

  it('dispose drops a session without a digest; the worker goes on serving', async () => {
    const file = path.join(dir, 'dropped');
    const hasher = createStreamHasher(data.length, { mode: 'worker', file });
    await writeFile(file, data.subarray(0, 5_000_000));
    hasher.written(5_000_000);
    hasher.dispose();
    expect(await feed(data.length, 'worker')).toBe(want);
  });
});
