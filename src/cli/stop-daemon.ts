/**
 * Stop agentd through its PID file: SIGTERM, wait up to the grace period, then SIGKILL. An
 * absent file, garbage, a dead PID or a PID that is not agentd is "nothing to stop" — never
 * an error, and a foreign process is never signalled: nor is init (pid 1) or agentctl itself,
 * whatever the file says. A PID file that cannot be read, or an agentd that may not be
 * signalled (another user's), is an error that says what to do.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { isAgentError } from '../errors.js';
import { inspectPidFile, type PidFileState } from '../host/pid-file.js';
import { CliError, EXIT } from './exit-codes.js';

export interface StopReport {
  pidFilePresent: boolean;
  pidFile: string;
  pid: number | null;
  signalled: boolean;
  forceKilled: boolean;
  /** Why nothing was signalled, when nothing was. */
  note?: string;
}

/** Alive and not a zombie (a zombie has exited; only its parent has not reaped it yet). */
export function isProcessAlive(pid: number, procDir = '/proc'): boolean {
  try {
    const stat = readFileSync(`${procDir}/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

async function waitGone(pid: number, timeoutMs: number, pollMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!isProcessAlive(pid)) return true;
    if (Date.now() >= deadline) return false;
    await delay(pollMs);
  }
}

/** What to do about a PID file that does not name agentd's process. */
function staleFileAdvice(pidFile: string): string {
  return `if agentd is running, stop it with systemctl stop agentd (or agentctl stop --pid-file naming its PID file); if not, remove ${pidFile}`;
}

function note(state: PidFileState, pidFile: string, advise: boolean): string {
  const advice = advise ? `; ${staleFileAdvice(pidFile)}` : '';
  switch (state.kind) {
    case 'absent':
      return `no PID file at ${pidFile}: nothing to stop`;
    case 'garbage': {
      // inspectPidFile calls a PID of 0 or 1 garbage: say which of the two it is.
      if (/^\d+$/.test(state.content)) {
        const pid = Number(state.content);
        return `the PID file ${pidFile} names pid ${pid}${pid === 1 ? ' (init)' : ''}, which agentctl never signals: nothing was signalled${advice}`;
      }
      return `the PID file ${pidFile} does not hold a PID (${JSON.stringify(state.content)}): nothing was signalled${advice}`;
    }
    case 'dead':
      return `pid ${state.pid} (from ${pidFile}) is not running: nothing to stop`;
    case 'foreign':
      return `pid ${state.pid} (from ${pidFile}) is not agentd (${state.cmdline.slice(0, 80)}): not signalled`;
    default:
      return '';
  }
}

/** The PID file could not be read (permissions, a directory): an error naming it and what to do. */
export function unreadable(pidFile: string, err: NodeJS.ErrnoException): CliError {
  // Something other than a regular file at the path (a directory, a device, a link): the
  // PID-file check's own message names it.
  if (isAgentError(err)) {
    return new CliError(EXIT.FAILED, `${err.message}; pass the PID file agentd writes with --pid-file`, {
      code: 'PID_FILE_UNREADABLE',
      pidFile,
      errno: err.code,
    });
  }
  const why =
    err.code === 'EACCES'
      ? 'permission denied: run agentctl as root (sudo)'
      : `${err.message}: pass the PID file agentd writes with --pid-file (its --pid-file)`;
  return new CliError(EXIT.FAILED, `cannot read the PID file ${pidFile}: ${why}`, {
    code: 'PID_FILE_UNREADABLE',
    pidFile,
    errno: err.code,
  });
}

/** Signalling agentd was refused (EPERM): it runs as another user. */
function notPermitted(pid: number, pidFile: string): CliError {
  return new CliError(
    EXIT.FAILED,
    `not allowed to signal agentd (pid ${pid}, from ${pidFile}): it runs as another user; run agentctl as root (sudo) or as that user`,
    { code: 'PERMISSION_DENIED', pid, pidFile },
  );
}

export async function stopDaemonByPidFile(
  pidFile: string,
  options: {
    graceMs: number;
    pollMs?: number;
    kill?: (pid: number, signal: NodeJS.Signals) => void;
    /** Where command lines are read (tests); /proc by default. */
    procDir?: string;
    /**
     * The agentd the caller checked the PID file names (src/cli/pid-file-check.ts): a file that
     * names another by the time it is read again is not acted on.
     */
    expectPid?: number;
    /**
     * Whether a PID file naming no PID gets the advice to stop agentd by other means or remove
     * the file (default true). uninstall says no: it has made sure no agentd runs, and removes
     * the file itself.
     */
    staleFileAdvice?: boolean;
  },
): Promise<StopReport> {
  const kill = options.kill ?? ((pid, signal) => process.kill(pid, signal));
  const pollMs = options.pollMs ?? 50;
  let state: PidFileState;
  try {
    state = await inspectPidFile(pidFile, options.procDir);
  } catch (err) {
    throw unreadable(pidFile, err as NodeJS.ErrnoException);
  }
  const base = { pidFilePresent: state.kind !== 'absent', pidFile };
  if ('pid' in state && state.pid === process.pid) {
    // Never agentd: a PID file that names agentctl itself was written by something else.
    return {
      ...base,
      pid: state.pid,
      signalled: false,
      forceKilled: false,
      note: `the PID file ${pidFile} names this agentctl (pid ${state.pid}), not agentd: not signalled; ${staleFileAdvice(pidFile)}`,
    };
  }
  if (state.kind !== 'agentd') {
    return {
      ...base,
      pid: 'pid' in state ? state.pid : null,
      signalled: false,
      forceKilled: false,
      note: note(state, pidFile, options.staleFileAdvice ?? true),
    };
  }
  const { pid } = state;
  if (options.expectPid !== undefined && pid !== options.expectPid) {
    return {
      ...base,
      pid,
      signalled: false,
      forceKilled: false,
      note: `the PID file ${pidFile} names pid ${pid} now, not pid ${options.expectPid} as it did a moment ago: not signalled; run agentctl stop again`,
    };
  }
  try {
    kill(pid, 'SIGTERM');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EPERM') throw notPermitted(pid, pidFile);
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') {
      return {
        ...base,
        pid,
        signalled: false,
        forceKilled: false,
        note: `pid ${pid} exited before it was signalled`,
      };
    }
    throw err;
  }
  if (await waitGone(pid, options.graceMs, pollMs))
    return { ...base, pid, signalled: true, forceKilled: false };
  try {
    kill(pid, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EPERM') throw notPermitted(pid, pidFile);
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
  await waitGone(pid, 5000, pollMs);
  return { ...base, pid, signalled: true, forceKilled: true };
}
