import { defineConfig } from 'vitest/config';

/**
 * Two projects (docs/testing.md): `host` is the real-host suite — few files, each minutes long
 * and mostly waiting on real systemd — and `main` is everything else, CPU-bound. `npm test` runs
 * them as two vitest processes side by side (`scripts/test.ts`), so the real hosts' waiting
 * overlaps the CPU work instead of holding two of its workers.
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'], exclude: ['test/host/**'] } },
      { extends: true, test: { name: 'host', include: ['test/host/**/*.test.ts'] } },
    ],
  },
});
