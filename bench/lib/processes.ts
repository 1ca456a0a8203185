/**
 * Child processes the benches measure: the built daemon (`dist/bin/agentd.js --host sim`, every
 * path in a temp dir) and the bare node:http baseline. Each runs in its own process so that it
 * does not share the bench's event loop (where the load generator runs).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { simDaemonFlags } from '../../test/support/daemon-flags.js';
import { requestUnix, waitFor200 } from './unix-http.js';

/** The repository root (this file is bench/lib/processes.ts). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const AGENTD_BIN = path.join(REPO_ROOT, 'dist/bin/agentd.js');
export const AGENTCTL_BIN = path.join(REPO_ROOT, 'dist/bin/agentctl.js');

export interface Child {
  pid: number;
  socket: string;
  stop(): Promise<void>;
}

/** A temp directory removed by `cleanup`. */
export async function makeTempDir(prefix: string): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

function collectStderr(child: ChildProcess): () => string {
  let text = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => (text = (text + chunk).slice(-4000)));
  return () => text;
}

/** SIGTERM, and SIGKILL if the child has not exited within `graceMs`. */
function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

function exitedEarly(child: ChildProcess, what: string, stderr: () => string): Promise<never> {
  return new Promise((_resolve, reject) => {
    child.once('exit', (code, signal) =>
      reject(new Error(`${what} exited early (code ${code}, signal ${signal}): ${stderr()}`)),
    );
  });
}

/**
 * Start the built daemon with every path under `dir`, at the default log level (stdout is
 * discarded unless `onStdoutLine` reads it); resolves once /readyz answers 200.
 */
export async function startDaemon(
  dir: string,
  o: {
    nodeArgs?: readonly string[];
    args?: readonly string[];
    /** A release executable to run instead of `node dist/bin/agentd.js`. */
    executable?: string;
    /** Leave the Machine watcher to its default (on with credentials) instead of `--no-watch`. */
    watch?: boolean;
    /** Told every line the daemon writes to stdout (its log), as it arrives; else stdout is discarded. */
    onStdoutLine?: (line: string) => void;
  } = {},
): Promise<Child> {
  const program = o.executable ?? AGENTD_BIN;
  await access(program).catch(() => {
    throw new Error(`${program} is missing: run npm run build first (npm run bench does)`);
  });
  const socket = path.join(dir, 'agentd.sock');
  const args = [
    ...(o.executable ? [] : [...(o.nodeArgs ?? []), AGENTD_BIN]),
    ...simDaemonFlags(dir, socket),
    // The default log level (info), as a daemon runs in production: what logging costs counts.
    '--log-format',
    'json',
    ...(o.watch ? [] : ['--no-watch']),
    ...(o.args ?? []),
  ];
  // No config file: the bench must not pick up /etc/agentd/config.yaml of the machine it runs on.
  const env = { ...process.env, AGENTD_CONFIG: path.join(dir, 'empty-config.yaml') };
  await writeFile(env.AGENTD_CONFIG, '');
  const child = spawn(o.executable ?? process.execPath, args, {
    cwd: dir,
    env,
    stdio: ['ignore', o.onStdoutLine ? 'pipe' : 'ignore', 'pipe'],
  });
  if (o.onStdoutLine) createInterface({ input: child.stdout! }).on('line', o.onStdoutLine);
  const stderr = collectStderr(child);
  await Promise.race([waitFor200(socket, '/readyz', 20_000), exitedEarly(child, 'agentd', stderr)]);
  return { pid: child.pid!, socket, stop: () => stopChild(child) };
}

/** Start the baseline server answering `body` on `dir`/baseline.sock. */
export async function startBaseline(
  dir: string,
  body: string,
  o: { nodeArgs?: readonly string[]; node?: string } = {},
): Promise<Child> {
  const socket = path.join(dir, 'baseline.sock');
  const bodyFile = path.join(dir, 'baseline-body.json');
  await writeFile(bodyFile, body);
  const script = path.join(REPO_ROOT, 'bench/lib/baseline-server.cjs');
  const child = spawn(o.node ?? process.execPath, [...(o.nodeArgs ?? []), script, socket, bodyFile], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr = collectStderr(child);
  const ready = new Promise<void>((resolve) => {
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      if (chunk.includes('ready')) resolve();
    });
  });
  await Promise.race([ready, exitedEarly(child, 'baseline server', stderr)]);
  // Answering at all is the readiness check here.
  await requestUnix(socket, 'POST', '/rpc', '{}');
  return { pid: child.pid!, socket, stop: () => stopChild(child) };
}
