/**
 * The single-instance lock: one agentd per PID file, per socket and per state dir, held for the
 * life of the process as abstract-namespace socket names (src/host/name-lock.ts). Two
 * simultaneous starts cannot both pass it — checking the PID file and then writing it could —
 * and a daemon killed by SIGKILL leaves no lock behind. The holder tells a process that asks
 * its PID, so a refused start can name it. agentctl asks too (`instanceLockHolders`): it is
 * how `stop` and `uninstall` know which agentd runs for a socket, PID file or state dir
 * whatever the PID file says, and `uninstall` holds the lock itself while it removes the node.
 */
import { PreconditionFailedError } from '../errors.js';
import {
  abstractLockName,
  askNameLockHolder,
  NAME_LOCKS_SUPPORTED,
  probeNameLock,
  tryBindNameLock,
} from './name-lock.js';
import type { HeldNameLock } from './name-lock.js';

export interface InstancePaths {
  pidFile: string;
  socket: string;
  /** The state dir as it really is (symlinks resolved): two spellings of one dir are one lock. */
  stateDir: string;
}

/** One lock of the instance lock, held by another process. */
export interface InstanceLockHolder {
  /** The agentd flag the path is given with: `--pid-file`, `--socket` or `--state-dir`. */
  flag: '--pid-file' | '--socket' | '--state-dir';
  /** The same as its key of InstancePaths. */
  option: keyof InstancePaths;
  path: string;
  /** The PID the holder answers; null when it answers none (an older agentd). */
  pid: number | null;
}

/** Whether the instance lock exists here (Linux's abstract sockets): without it, nothing is known. */
export const INSTANCE_LOCK_SUPPORTED = NAME_LOCKS_SUPPORTED;

const LOCKS = [
  ['pid-file', 'pidFile', '--pid-file'],
  ['socket', 'socket', '--socket'],
  ['state-dir', 'stateDir', '--state-dir'],
] as const;

const pidOf = (answer: string | null): number | null =>
  answer !== null && /^\d+$/.test(answer) ? Number(answer) : null;

/**
 * Take the locks of the PID file, the socket and the state dir, each answering this process's
 * PID; or, when another process holds one, take none and return that one and its holder.
 */
export async function tryAcquireInstanceLock(
  paths: InstancePaths,
): Promise<HeldNameLock | InstanceLockHolder> {
  if (!NAME_LOCKS_SUPPORTED) return { release: async () => undefined };
  const held: HeldNameLock[] = [];
  for (const [kind, key, flag] of LOCKS) {
    const file = paths[key];
    const name = abstractLockName(`instance-${kind}`, file);
    const lock = await tryBindNameLock(name, { answer: String(process.pid) });
    if (lock === null) {
      await Promise.all(held.map((h) => h.release()));
      return { flag, option: key, path: file, pid: pidOf(await askNameLockHolder(name)) };
    }
    held.push(lock);
  }
  return {
    release: async () => {
      await Promise.all(held.map((h) => h.release()));
    },
  };
}

/** Take the locks of the PID file, the socket and the state dir, or throw PRECONDITION_FAILED naming the one held and its holder. */
export async function acquireInstanceLock(paths: InstancePaths): Promise<HeldNameLock> {
  const lock = await tryAcquireInstanceLock(paths);
  if ('release' in lock) return lock;
  const holder = lock.pid === null ? 'another process' : `pid ${lock.pid}`;
  throw new PreconditionFailedError(
    `agentd is already running with ${lock.flag} ${lock.path} (${holder} holds its instance lock); stop it first with agentctl stop`,
    { data: { reason: 'AlreadyRunning', [lock.option]: lock.path, pid: lock.pid } },
  );
}

/**
 * Which of the locks of these paths another process holds, and the PID each holder answers;
 * none when no agentd runs with any of them. Only asks: a start at the same moment is never
 * disturbed. Empty where the lock does not exist (see INSTANCE_LOCK_SUPPORTED).
 */
export async function instanceLockHolders(paths: Partial<InstancePaths>): Promise<InstanceLockHolder[]> {
  if (!NAME_LOCKS_SUPPORTED) return [];
  const holders: InstanceLockHolder[] = [];
  for (const [kind, key, flag] of LOCKS) {
    const file = paths[key];
    if (file === undefined) continue;
    const probe = await probeNameLock(abstractLockName(`instance-${kind}`, file));
    if (probe.held) holders.push({ flag, option: key, path: file, pid: pidOf(probe.answer) });
  }
  return holders;
}
