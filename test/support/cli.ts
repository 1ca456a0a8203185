/**
 * Test harness: run the built `agentctl` (`node dist/bin/agentctl.js`) as a user would, and
 * collect its exit code and output. Run `npm run build` first.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, childEnv } from './daemon.js';

export const AGENTCTL_BIN = path.join(REPO_ROOT, 'dist/bin/agentctl.js');

export interface CliRun {
  /** Exit code; null when agentctl was killed (see `timedOut`). */
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface RunAgentctlOptions {
  /** Extra environment (inherited `AGENTD_*`/`AGENTCTL_*` variables are dropped; NO_COLOR is set). */
  env?: Record<string, string>;
  cwd?: string;
  /** Kill agentctl after this long (default 15 s) and report `timedOut`. */
  timeoutMs?: number;
}

export async function runAgentctl(args: string[], options: RunAgentctlOptions = {}): Promise<CliRun> {
  if (!existsSync(AGENTCTL_BIN)) throw new Error(`${AGENTCTL_BIN} is missing: run npm run build first`);
  const proc = spawn(process.execPath, [AGENTCTL_BIN, ...args], {
    cwd: options.cwd ?? process.cwd(),
    env: childEnv(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  proc.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill('SIGKILL');
  }, options.timeoutMs ?? 15_000);
  const code = await new Promise<number | null>((resolve, reject) => {
    proc.once('error', reject);
    proc.once('close', (c) => resolve(c));
  });
  clearTimeout(timer);
  return { code, stdout, stderr, timedOut };
}

/** A stand-in for process.stdout/stderr that records what is written (for agentctl run in-process). */
export function recordingStream(isTTY = false): NodeJS.WriteStream & { text: () => string } {
  let text = '';
  return {
    isTTY,
    write(chunk: string) {
      text += chunk;
      return true;
    },
    text: () => text,
  } as unknown as NodeJS.WriteStream & { text: () => string };
}
