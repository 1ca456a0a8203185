/**
 * One builder at a time across test processes for a cached build artifact (the real-host rootfs,
 * its machine images, the release): vitest runs test files in several processes, and each may
 * find the cache empty at once. The lock is agentd's own name lock (an abstract unix socket,
 * `src/host/name-lock.ts`), which the kernel frees however its holder dies: no lock file, no
 * stale-lock takeover.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { abstractLockName, tryBindNameLock } from '../../src/host/name-lock.js';

/**
 * Run `build` holding the lock named after `file`, unless `done()` says another process built
 * it meanwhile (checked again once the lock is held). Waits at most `timeoutMs` for the lock.
 */
export async function buildOnce(
  file: string,
  done: () => boolean,
  build: () => Promise<void>,
  timeoutMs = 900_000,
): Promise<void> {
  const name = abstractLockName('test-build', file);
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    const lock = await tryBindNameLock(name);
    if (lock) {
      try {
        if (!done()) await build();
      } finally {
        await lock.release();
      }
      return;
    }
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs / 1000} s for another build of ${file}`);
    await delay(500);
  }
}
