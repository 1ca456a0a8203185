/**
 * The single-instance lock: one agentd per PID file and per socket, held for the life of the
 * process as abstract-namespace socket names (src/host/name-lock.ts). Two simultaneous starts
 * cannot both pass it — checking the PID file and then writing it could — and a daemon killed
 * by SIGKILL leaves no lock behind.
 */
import { PreconditionFailedError } from '../errors.js';
import { abstractLockName, NAME_LOCKS_SUPPORTED, tryBindNameLock } from '../host/name-lock.js';
import type { HeldNameLock } from '../host/name-lock.js';

/** Take the locks of `pidFile` and `socket`, or throw PRECONDITION_FAILED naming the one held. */
export async function acquireInstanceLock(pidFile: string, socket: string): Promise<HeldNameLock> {
  if (!NAME_LOCKS_SUPPORTED) return { release: async () => undefined };
  const held: HeldNameLock[] = [];
  const release = async (): Promise<void> => {
    await Promise.all(held.map((h) => h.release()));
  };
  for (const [kind, file, flag] of [
    ['pid-file', pidFile, '--pid-file'],
    ['socket', socket, '--socket'],
  ] as const) {
    const lock = await tryBindNameLock(abstractLockName(`instance-${kind}`, file));
    if (lock === null) {
      await release();
      throw new PreconditionFailedError(
        `agentd is already running with ${flag} ${file} (another process holds its instance lock); stop it first with agentctl stop`,
        { data: { reason: 'AlreadyRunning', [kind === 'pid-file' ? 'pidFile' : 'socket']: file } },
      );
    }
    held.push(lock);
  }
  return { release };
}
