/**
 * Whether the PID file names the agentd that `stop` and `uninstall` are about, checked before
 * anything is signalled or changed. The PID file alone cannot say that: it may hold garbage,
 * name a process that is not agentd, or be another agentd's. So they also ask who runs: the
 * daemon answering on the socket (its `status` says its PID and PID file) and the holders of
 * agentd's instance lock on the PID file, socket and state dir (src/host/instance-lock.ts),
 * which every running agentd holds whatever its PID file says. When those name an agentd the
 * PID file does not, the command is refused with PID_FILE_MISMATCH.
 */
import { realpath } from 'node:fs/promises';
import {
  INSTANCE_LOCK_SUPPORTED,
  instanceLockHolders,
  tryAcquireInstanceLock,
  type InstancePaths,
} from '../host/instance-lock.js';
import type { HeldNameLock } from '../host/name-lock.js';
import { inspectPidFile, type PidFileState } from '../host/pid-file.js';
import { CliError, EXIT } from './exit-codes.js';
import { unreadable } from './stop-daemon.js';

/** What the daemon on the socket says of itself (`status`), when it answers. */
export interface AnsweringDaemon {
  pid: number;
  /** Its --pid-file (an older agentd does not say). */
  pidFile?: string | undefined;
}

/** The PID file, classified; PID_FILE_UNREADABLE when it cannot be read. */
export async function readPidFile(pidFile: string): Promise<PidFileState> {
  try {
    return await inspectPidFile(pidFile);
  } catch (err) {
    throw unreadable(pidFile, err as NodeJS.ErrnoException);
  }
}

/** The agentd PID the PID file names, or null. */
const agentdPid = (state: PidFileState): number | null => (state.kind === 'agentd' ? state.pid : null);

/** "the PID file F holds no PID ("x")", for a message. */
export function describePidFile(pidFile: string, state: PidFileState): string {
  const file = `the PID file ${pidFile}`;
  switch (state.kind) {
    case 'absent':
      return `${file} does not exist`;
    case 'garbage':
      return /^\d+$/.test(state.content)
        ? `${file} names pid ${state.content}, which is never agentd`
        : `${file} holds no PID (${JSON.stringify(state.content)})`;
    case 'dead':
      return `${file} names pid ${state.pid}, which is not running`;
    case 'foreign':
      return `${file} names pid ${state.pid}, which is not agentd (${state.cmdline.slice(0, 80)})`;
    case 'agentd':
      return `${file} names agentd pid ${state.pid}`;
  }
}

function mismatch(
  message: string,
  data: { pidFile: string; state: PidFileState; pid: number | null; daemonPidFile?: string },
): CliError {
  return new CliError(EXIT.FAILED, message, {
    code: 'PID_FILE_MISMATCH',
    pidFile: data.pidFile,
    found: data.state.kind,
    pid: data.pid,
    ...(data.daemonPidFile === undefined ? {} : { daemonPidFile: data.daemonPidFile }),
  });
}

/**
 * What to do about agentd `pid`, which `pidFile` does not name: pass the PID file it writes
 * (when it said which, and that is another), or stop it by other means.
 */
function advice(pid: number, pidFile: string, daemonPidFile: string | undefined): string {
  if (daemonPidFile !== undefined && daemonPidFile !== pidFile)
    return `pass the PID file it writes: --pid-file ${daemonPidFile}`;
  const stopIt = `stop it with systemctl stop agentd (or kill ${pid})`;
  return daemonPidFile === pidFile
    ? `it writes ${pidFile} itself, and the file no longer names it: ${stopIt}`
    : `pass the PID file it writes with --pid-file, or ${stopIt}`;
}

/** "a", "a and b", "a, b and c" */
function list(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}

/** The state dir as the instance lock names it: symlinks resolved, when it exists. */
async function lockedStateDir(stateDir: string): Promise<string> {
  return realpath(stateDir).catch(() => stateDir);
}

/**
 * Before `uninstall` changes anything: either no agentd runs for this node, or exactly one, the
 * one the PID file names (which the stop step then stops). An agentd runs when it answers on the
 * socket or holds the instance lock of the PID file, the socket or the state dir. Throws
 * PID_FILE_UNREADABLE or PID_FILE_MISMATCH (naming the file, what is in it and who runs);
 * returns the PID file's state otherwise.
 */
export async function checkUninstallPidFile(o: {
  pidFile: string;
  socket: string;
  stateDir: string;
  daemon: AnsweringDaemon | null;
}): Promise<PidFileState> {
  const state = await readPidFile(o.pidFile);
  const filePid = agentdPid(state);
  const holders = await instanceLockHolders({
    pidFile: o.pidFile,
    socket: o.socket,
    stateDir: await lockedStateDir(o.stateDir),
  });
  const answering = o.daemon?.pid;
  const known = [...holders.map((h) => h.pid), ...(answering === undefined ? [] : [answering])];
  const pids = [...new Set(known.flatMap((pid) => (pid === null ? [] : [pid])))];
  // "answers on --socket S and holds the instance lock of --pid-file F and --state-dir D"
  const what = (pid: number | null): string => {
    const locks = holders.filter((h) => h.pid === pid).map((h) => `${h.flag} ${h.path}`);
    const lockText = locks.length === 0 ? [] : [`holds the instance lock of ${list(locks)}`];
    return list([
      ...(pid !== null && pid === answering ? [`answers on --socket ${o.socket}`] : []),
      ...lockText,
    ]);
  };
  const described = describePidFile(o.pidFile, state);
  const daemonPidFile = o.daemon?.pidFile;
  const refused =
    'uninstall would not stop it, and does not remove the machines and files of a running agentd: nothing was changed';
  if (pids.length > 1) {
    throw mismatch(
      `more than one agentd runs for this node (${pids.map((p) => `pid ${p} ${what(p)}`).join('; ')}), and ${described}: ${refused}; stop them (systemctl stop agentd, agentctl stop --pid-file with each one's PID file), then run agentctl uninstall again`,
      { pidFile: o.pidFile, state, pid: pids[0] ?? null, daemonPidFile },
    );
  }
  const running = pids[0] ?? null;
  if (running !== null && running !== filePid) {
    throw mismatch(
      `agentd (pid ${running}) runs for this node — it ${what(running)} — but ${described}: ${refused}; ${advice(running, o.pidFile, daemonPidFile)}, then run agentctl uninstall again`,
      { pidFile: o.pidFile, state, pid: running, daemonPidFile },
    );
  }
  if (running === null && holders.length > 0 && filePid === null) {
    // A holder that does not say its PID (an older agentd), and a PID file that names no agentd.
    throw mismatch(
      `a process that does not say its PID ${what(null)}, and ${described}: if it is an agentd, uninstall would not stop it; nothing was changed; stop it first (systemctl stop agentd), or pass the PID file it writes with --pid-file`,
      { pidFile: o.pidFile, state, pid: null, daemonPidFile },
    );
  }
  if (!INSTANCE_LOCK_SUPPORTED && (state.kind === 'garbage' || state.kind === 'foreign')) {
    // No instance lock to ask here: a PID file that names no agentd leaves it unknown whether one runs.
    throw mismatch(
      `${described}, and without agentd's instance lock on this system agentctl cannot tell whether agentd runs: nothing was changed; stop agentd first if it runs, then remove ${o.pidFile} and run agentctl uninstall again`,
      { pidFile: o.pidFile, state, pid: null },
    );
  }
  return state;
}

/**
 * Take agentd's instance lock for uninstall, once the daemon is stopped: proof that no agentd
 * runs for this PID file, socket and state dir, and none starts on them while the machines and
 * files go. Throws naming the one still held and its holder.
 */
export async function claimInstanceLock(paths: InstancePaths): Promise<HeldNameLock> {
  const lock = await tryAcquireInstanceLock({ ...paths, stateDir: await lockedStateDir(paths.stateDir) });
  if ('release' in lock) return lock;
  const holder = lock.pid === null ? 'a process that does not say its PID' : `pid ${lock.pid}`;
  throw new Error(
    `an agentd still runs: ${holder} holds the instance lock of ${lock.flag} ${lock.path}; stop it (systemctl stop agentd${lock.pid === null ? '' : `, or kill ${lock.pid}`}), then run agentctl uninstall again`,
  );
}

/** The agentd on the socket: the PID it answers, else the one holding the socket's instance lock. */
async function socketAgentd(
  socket: string,
  daemon: AnsweringDaemon | null,
): Promise<number | 'unknown' | null> {
  if (daemon) return daemon.pid;
  const [holder] = await instanceLockHolders({ socket });
  if (holder === undefined) return null;
  return holder.pid ?? 'unknown';
}

/**
 * Before `stop` signals anything: the PID file must name the agentd on the socket. With
 * `socketNamed` (--socket or AGENTD_SOCKET given), the socket is what names the daemon to stop:
 * the PID file must name that one, or no agentd be on either. With the default socket, an agentd
 * answering there must be the PID file's; with none there, the PID file alone decides. Throws
 * PID_FILE_UNREADABLE or PID_FILE_MISMATCH; returns the PID file's state otherwise.
 */
export async function checkStopPidFile(o: {
  pidFile: string;
  socket: string;
  socketNamed: boolean;
  daemon: AnsweringDaemon | null;
}): Promise<PidFileState> {
  const state = await readPidFile(o.pidFile);
  const filePid = agentdPid(state);
  const onSocket = await socketAgentd(o.socket, o.daemon);
  if (onSocket === filePid || (onSocket === null && !o.socketNamed)) return state;
  const daemonPidFile = o.daemon?.pidFile;
  const described = describePidFile(o.pidFile, state);
  const alone = `to stop pid ${filePid}, name it by its PID file alone: agentctl stop --pid-file ${o.pidFile}`;
  if (onSocket === null) {
    // Named by --socket, where no agentd is: nothing to stop, unless the PID file names one.
    if (filePid === null) return state;
    throw mismatch(
      `no agentd runs on --socket ${o.socket}, but ${described}: not signalled (it is not the agentd on --socket); ${alone}`,
      { pidFile: o.pidFile, state, pid: null },
    );
  }
  if (onSocket === 'unknown') {
    throw mismatch(
      `a process that does not say its PID holds the instance lock of --socket ${o.socket}, so agentctl cannot tell whether ${filePid === null ? 'the PID file names it' : `it is pid ${filePid}`}: not signalled; ${filePid === null ? `pass its PID file with --pid-file` : alone}`,
      { pidFile: o.pidFile, state, pid: null },
    );
  }
  throw mismatch(
    `the agentd on --socket ${o.socket} is pid ${onSocket}, but ${described}: not signalled; ${advice(onSocket, o.pidFile, daemonPidFile)}`,
    {
      pidFile: o.pidFile,
      state,
      pid: onSocket,
      daemonPidFile,
    },
  );
}
