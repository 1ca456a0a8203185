/**
 * The single-instance lock: one agentd per PID file, per socket and per state dir, held for the
 * life of the process as abstract-namespace socket names (src/host/name-lock.ts). Two
 * simultaneous starts cannot both pass it — checking the PID file and then writing it could —
 * and a daemon killed by SIGKILL leaves no lock behind. The holder tells a process that asks
 * its PID, so a refused start can name it.
 */
import { PreconditionFailedError } from '../errors.js';
import {
  abstractLockName,
  askNameLockHolder,
  NAME_LOCKS_SUPPORTED,
  tryBindNameLock,
} from '../host/name-lock.js';
import type { HeldNameLock } from '../host/name-lock.js';

export interface InstancePaths {
  pidFile: string;
  socket: string;
  /** The state dir as it really is (symlinks resolved): two spellings of one dir are one lock. */
  stateDir: string;
}

/** Take the locks of the PID file, the socket and the state dir, or throw PRECONDITION_FAILED naming the one held and its holder. */
export async function acquireInstanceLock(paths: InstancePaths): Promise<HeldNameLock> {
  if (!NAME_LOCKS_SUPPORTED) return { release: async () => undefined };
  const held: HeldNameLock[] = [];
  const release = async (): Promise<void> => {
    await Promise.all(held.map((h) => h.release()));
  };
  for (const [kind, key, flag] of [
    ['pid-file', 'pidFile', '--pid-file'],
    ['socket', 'socket', '--socket'],
    ['state-dir', 'stateDir', '--state-dir'],
  ] as const) {
    const file = paths[key];
    const name = abstractLockName(`instance-${kind}`, file);
    const lock = await tryBindNameLock(name, { answer: String(process.pid) });
    if (lock === null) {
      await release();
      const answer = await askNameLockHolder(name);
      const pid = answer !== null && /^\d+$/.test(answer) ? Number(answer) : null;
      const holder = pid === null ? 'another process' : `pid ${pid}`;
      throw new PreconditionFailedError(
        `agentd is already running with ${flag} ${file} (${holder} holds its instance lock); stop it first with agentctl stop`,
        { data: { reason: 'AlreadyRunning', [key]: file, pid } },
      );
    }
    held.push(lock);
  }
  return { release };
}
