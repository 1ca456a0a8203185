import { setTimeout as delay } from 'node:timers/promises';
import type { Clock } from './types.js';

/** The real clock: wall time and timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: async (ms, signal) => {
    await delay(ms, undefined, signal ? { signal } : undefined);
  },
};
