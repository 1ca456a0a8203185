/**
 * Descriptors a spawn needs, checked before it is tried. A child process takes a pipe per piped
 * stdio stream and one more for libuv's exec report, about 6 to 8 descriptors for a moment.
 * When they run out, execa (9.x) throws "subprocess.stdio is not iterable" at once, and the
 * ChildProcess it dropped then emits an `error` (EMFILE) that nobody hears: an unhandled event
 * that ends agentd (docs/operations.md, "A full disk, exhausted descriptors").
 *
 * So every spawn first opens SPAWN_HEADROOM descriptors on /dev/null and closes them again,
 * synchronously, just before the spawn (no JavaScript of agentd's runs between them; only the
 * thread pool's file operations may, which the margin covers). When they cannot be opened it throws an EMFILE error instead, which the caller sees
 * as a failed command, and which the reserve (src/engine/reserve.ts) recognises: it frees its
 * held descriptors and the step runs again.
 */
import { closeSync, openSync } from 'node:fs';

/** Twice what a spawn with three pipes takes, so that a check that passes leaves a margin. */
export const SPAWN_HEADROOM = 16;

/** Throws an EMFILE (or ENFILE) error, naming `command`, when a spawn would run out of descriptors. */
export function ensureSpawnHeadroom(command: string, headroom: number = SPAWN_HEADROOM): void {
  const fds: number[] = [];
  try {
    for (let i = 0; i < headroom; i++) fds.push(openSync('/dev/null', 'r'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EMFILE' && code !== 'ENFILE') throw err;
    throw Object.assign(
      new Error(
        `${code}: too many open files: cannot run ${command}: a child process needs about ${headroom} free descriptors and agentd has ${fds.length}`,
        { cause: err },
      ),
      { code },
    );
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}
