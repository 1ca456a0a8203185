import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createStreamHasher, WORKER_HASH_MIN_BYTES } from '../../../../src/provision/artifacts/hasher.js';

const data = randomBytes(WORKER_HASH_MIN_BYTES + 3 * 1024 * 1024 + 17);
const want = createHash('sha256').update(data).digest('hex');

/** Feed `data` in uneven chunks, honouring back-pressure like the downloader does. */
async function feed(
  expected: number | undefined,
  mode: 'auto' | 'inline' | 'worker' = 'auto',
): Promise<{ hex: string; wasBusy: boolean }> {
  const hasher = createStreamHasher(expected, { mode });
  let wasBusy = false;
  for (let offset = 0, i = 0; offset < data.length; i++) {
    const size = 1000 + ((i * 7919) % 70_000);
    hasher.update(data.subarray(offset, offset + size));
    offset += size;
    if (hasher.busy) {
      wasBusy = true;
      await new Promise<void>((resolve) => hasher.onIdle(resolve));
    }
  }
  return { hex: await hasher.digest(), wasBusy };
}

describe('createStreamHasher', () => {
  it('hashes inline and on the worker with the same result', async () => {
    expect((await feed(undefined)).hex).toBe(want);
    expect((await feed(data.length)).hex).toBe(want);
    expect((await feed(data.length, 'inline')).hex).toBe(want);
    expect((await feed(1024, 'worker')).hex).toBe(want);
  });

  it('keeps concurrent worker sessions apart', async () => {
    const other = randomBytes(WORKER_HASH_MIN_BYTES + 1);
    const a = createStreamHasher(data.length, { mode: 'worker' });
    const b = createStreamHasher(other.length, { mode: 'worker' });
    a.update(data.subarray(0, 5_000_000));
    b.update(other);
    a.update(data.subarray(5_000_000));
    const [ha, hb] = await Promise.all([a.digest(), b.digest()]);
    expect(ha).toBe(want);
    expect(hb).toBe(createHash('sha256').update(other).digest('hex'));
  });

  it('asks the producer to pause when the worker falls behind, and resumes it', async () => {
    const hasher = createStreamHasher(64 * 1024 * 1024, { mode: 'worker' });
    const chunk = Buffer.alloc(1024 * 1024, 1);
    let sawBusy = false;
    for (let i = 0; i < 48; i++) {
      hasher.update(chunk);
      if (hasher.busy) {
        sawBusy = true;
        await new Promise<void>((resolve) => hasher.onIdle(resolve));
        expect(hasher.busy).toBe(false);
      }
    }
    expect(sawBusy).toBe(true);
    await hasher.digest();
  });

  it('dispose drops a session without a digest', async () => {
    const hasher = createStreamHasher(data.length, { mode: 'worker' });
    hasher.update(data.subarray(0, 2_000_000));
    hasher.dispose();
    expect((await feed(data.length, 'worker')).hex).toBe(want);
  });
});
