/**
 * Stop agentd through its PID file: SIGTERM, wait up to the grace period, then SIGKILL. An
 * absent file, garbage, a dead PID or a PID that is not agentd is "nothing to stop" — never
 * an error, and a foreign process is never signalled.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { inspectPidFile, type PidFileState } from '../host/pid-file.js';

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

function note(state: PidFileState): string {
  switch (state.kind) {
    case 'absent':
      return 'no PID file: nothing to stop';
    case 'garbage':
      return `the PID file does not hold a PID (${JSON.stringify(state.content)}): nothing to stop`;
    case 'dead':
      return `pid ${state.pid} is not running: nothing to stop`;
    case 'foreign':
      return `pid ${state.pid} is not agentd (${state.cmdline.slice(0, 80)}): not signalled`;
    default:
      return '';
  }
}

export async function stopDaemonByPidFile(
  pidFile: string,
  options: { graceMs: number; pollMs?: number; kill?: (pid: number, signal: NodeJS.Signals) => void },
): Promise<StopReport> {
  const kill = options.kill ?? ((pid, signal) => process.kill(pid, signal));
  const pollMs = options.pollMs ?? 50;
  const state = await inspectPidFile(pidFile);
  const base = { pidFilePresent: state.kind !== 'absent', pidFile };
  if (state.kind !== 'agentd') {
    return {
      ...base,
      pid: 'pid' in state ? state.pid : null,
      signalled: false,
      forceKilled: false,
      note: note(state),
    };
  }
  const { pid } = state;
  try {
    kill(pid, 'SIGTERM');
  } catch (err) {
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
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
  await waitGone(pid, 5000, pollMs);
  return { ...base, pid, signalled: true, forceKilled: true };
}
