import { existsSync } from 'node:fs';
import path from 'node:path';

export const DEFAULT_SOCKET = '/run/agentd/agentd.sock';
export const DEFAULT_PID_FILE = '/run/agentd/agentd.pid';
const SIM_DIR = '.agentd';

/** The longest path of a unix socket: the kernel's sun_path holds 108 bytes, a NUL included. */
export const MAX_SOCKET_PATH_BYTES = 107;

/** What is wrong with a socket path agentctl is to dial ("is empty"), or null when nothing is. */
export function socketPathProblem(socket: string): string | null {
  if (socket === '') return 'is empty: name the socket agentd listens on (default /run/agentd/agentd.sock)';
  const bytes = Buffer.byteLength(socket);
  if (bytes > MAX_SOCKET_PATH_BYTES)
    return `is ${bytes} bytes long, and a unix socket path has at most ${MAX_SOCKET_PATH_BYTES}: use a shorter path (a symbolic link to the socket, say)`;
  return null;
}

/**
 * The default of a path option: the system path, or the `--sim` one under ./.agentd/ when only
 * that one exists (so `npx agentctl status` finds a try-out daemon).
 */
function pick(systemPath: string, simName: string, cwd: string): string {
  const simPath = path.join(cwd, SIM_DIR, simName);
  if (!existsSync(systemPath) && existsSync(simPath)) return simPath;
  return systemPath;
}

export function defaultSocket(env: NodeJS.ProcessEnv, cwd: string): string {
  return env.AGENTD_SOCKET ? path.resolve(cwd, env.AGENTD_SOCKET) : pick(DEFAULT_SOCKET, 'agentd.sock', cwd);
}

export function defaultPidFile(env: NodeJS.ProcessEnv, cwd: string): string {
  return env.AGENTD_PID_FILE
    ? path.resolve(cwd, env.AGENTD_PID_FILE)
    : pick(DEFAULT_PID_FILE, 'agentd.pid', cwd);
}
