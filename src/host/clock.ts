import type * as TimersPromises from 'node:timers/promises';
import type { Clock } from './types.js';

/**
 * node:timers/promises, loaded at the first sleep rather than with this module: most agentctl
 * commands never sleep, and each module loaded is part of every start (docs/benchmarks.md,
 * "CLI startup"). Through `process.getBuiltinModule`, not `import()`: the bundles are scripts
 * that the loader evaluates, where a dynamic import cannot run (scripts/build.ts checks).
 */
let timers: typeof TimersPromises | undefined;

/** The real clock: wall time and timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms, signal) => {
    timers ??= process.getBuiltinModule('node:timers/promises');
    await timers.setTimeout(ms, undefined, signal ? { signal } : undefined);
  },
};
