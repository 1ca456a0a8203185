import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Four projects (docs/testing.md), run by `npm test` through `scripts/test.ts`:
 *
 * - `unit`: test/unit, without per-file isolation. Each file would otherwise import the sources
 *   afresh in a fresh module graph (the Kubernetes client alone is 1 s of CPU): measured on 2
 *   cores, 180 s and 206 s of CPU with isolation, 60 s and 72 s without. Unit tests keep no
 *   state in modules; a file that needs a module graph of its own (a `vi.mock`) is listed in
 *   `ISOLATED_UNIT_FILES` and runs in `main`.
 * - `main`: integration and system tests (real daemons, real tools), isolated per file. They
 *   mostly wait (daemons starting, simulated host commands with latency, timers): one worker
 *   per core less one (vitest's default) left a core idle (734 s), three took 497 s on 2 cores.
 *   A test that takes 10-20 s alone has taken over 30 s in a full run beside the real-host
 *   suite, so their timeout is 90 s: it bounds a hang, and a passing test is no slower.
 * - `host`: the real-host suite — few files, each minutes long and mostly waiting on real
 *   systemd; `scripts/test.ts` runs it in a vitest process of its own beside the others.
 * - `cluster`: test/cluster, agentd against a real control plane (etcd, kube-apiserver,
 *   kube-controller-manager); each file starts one (seconds, ~0.5 GB), so `scripts/test.ts`
 *   runs them one at a time in a third vitest process once the control plane is built.
 */
const ISOLATED_UNIT_FILES = ['test/unit/sim/bin/main.test.ts', 'test/unit/cli/call-timeouts.test.ts'];
const WORKERS = availableParallelism() + 1;

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          exclude: ISOLATED_UNIT_FILES,
          isolate: false,
          maxWorkers: WORKERS,
        },
      },
      {
        extends: true,
        test: {
          name: 'main',
          include: ['test/integration/**/*.test.ts', 'test/system/**/*.test.ts', ...ISOLATED_UNIT_FILES],
          maxWorkers: WORKERS,
          testTimeout: 90_000,
          hookTimeout: 90_000,
        },
      },
      { extends: true, test: { name: 'host', include: ['test/host/**/*.test.ts'] } },
      {
        extends: true,
        test: {
          name: 'cluster',
          include: ['test/cluster/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
