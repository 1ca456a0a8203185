/** Run a command of this machine for the real-host harness: output captured, never a shell. */
import { spawn } from 'node:child_process';

export interface RunResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string;
  /** Default 120 s; the command is SIGKILLed after it. */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/** Run `file args`; resolves with its exit code (a signal counts as 128 + n), never rejects on exit. */
export function run(file: string, args: string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: options.env ?? process.env,
      cwd: options.cwd,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      stderr += `\n[killed after ${options.timeoutMs ?? 120_000} ms]`;
      child.kill('SIGKILL');
    }, options.timeoutMs ?? 120_000);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${file}: ${err.message}`, { cause: err }));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ exitCode: code ?? 128 + (signal ? 9 : 0), stdout, stderr });
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

/** `run`, failing with the command line and its output unless it exits 0. */
export async function runOk(file: string, args: string[], options: RunOptions = {}): Promise<RunResult> {
  const res = await run(file, args, options);
  if (res.exitCode !== 0) {
    throw new Error(`${file} ${args.join(' ')} exited ${res.exitCode}\n${res.stdout}${res.stderr}`);
  }
  return res;
}
