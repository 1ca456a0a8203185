import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildOnce } from '../../support/build-lock.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'build-lock-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('buildOnce', () => {
  it('runs one build for concurrent callers; the others wait for it', async () => {
    const file = path.join(dir, 'artifact');
    let builds = 0;
    let running = 0;
    const build = async (): Promise<void> => {
      builds++;
      running++;
      expect(running).toBe(1);
      await delay(300);
      await writeFile(file, 'x');
      running--;
    };
    await Promise.all([1, 2, 3].map(() => buildOnce(file, () => existsSync(file), build)));
    expect(builds).toBe(1);
    expect(existsSync(file)).toBe(true);
  });

  it('a failed build frees the lock for the next caller', async () => {
    const file = path.join(dir, 'artifact');
    await expect(
      buildOnce(
        file,
        () => existsSync(file),
        () => Promise.reject(new Error('boom')),
      ),
    ).rejects.toThrow('boom');
    await buildOnce(
      file,
      () => existsSync(file),
      () => writeFile(file, 'x'),
    );
    expect(existsSync(file)).toBe(true);
  });

  it('nothing to do when the artifact is there', async () => {
    const file = path.join(dir, 'artifact');
    await writeFile(file, 'x');
    await buildOnce(
      file,
      () => existsSync(file),
      () => Promise.reject(new Error('must not build')),
    );
  });
});
