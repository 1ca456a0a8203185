/**
 * Child process for the sim state-lock tests, each mode a different holder of the lock of
 * `<stateFile>`:
 * - `count <stateFile> <counterFile> <n>`: n read-modify-writes of a counter, each under the
 *   lock and with a pause between read and write, so that any overlap loses an increment;
 * - `hold <stateFile>`: take the lock, print `held`, keep it until killed;
 * - `hold-for <stateFile> <ms> <markerFile>`: take the lock, print `held`, keep it `ms`, write
 *   the marker file while still holding it, then release and exit.
 * Usage: node --import tsx test/support/sim-lock-child.ts <mode> …
 */
import { writeFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { withSimStateLock } from '../../src/sim/host/state-lock.js';
import { incrementSlowly } from './slow-counter.js';

const [mode, stateFile, ...rest] = process.argv.slice(2);
if (!mode || !stateFile) throw new Error('usage: sim-lock-child.ts <mode> <stateFile> …');

if (mode === 'count') {
  const [counterFile, n] = rest;
  if (!counterFile || !n) throw new Error('usage: count <stateFile> <counterFile> <n>');
  for (let i = 0; i < Number(n); i++) await withSimStateLock(stateFile, () => incrementSlowly(counterFile));
} else if (mode === 'hold') {
  await withSimStateLock(stateFile, async () => {
    process.stdout.write('held\n');
    // Until killed. The lock's socket does not keep a process alive (it is unref'd), so a
    // timer must, or the child would exit at once and free the lock.
    setInterval(() => undefined, 1 << 30);
    await new Promise(() => undefined);
  });
} else if (mode === 'hold-for') {
  const [ms, markerFile] = rest;
  if (!ms || !markerFile) throw new Error('usage: hold-for <stateFile> <ms> <markerFile>');
  await withSimStateLock(stateFile, async () => {
    process.stdout.write('held\n');
    await delay(Number(ms));
    await writeFile(markerFile, 'released');
  });
} else {
  throw new Error(`sim-lock-child.ts: unknown mode ${mode}`);
}
