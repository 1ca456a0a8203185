/**
 * Test harness: the real, built daemon (`node dist/bin/agentd.js`) on a unix socket in a fresh
 * temp dir, and helpers to talk to it. Run `npm run build` first.
 *
 * Cleanup: a daemon started inside a test is killed (and its dir removed) when that test ends,
 * pass or fail. One started in `beforeAll` must be released with `dispose()` in `afterAll`; a
 * file-level `afterAll` and a process `exit` hook kill anything still left as a safety net.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, onTestFinished } from 'vitest';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const AGENTD_BIN = path.join(REPO_ROOT, 'dist/bin/agentd.js');

/** How long to wait for `/readyz` before failing with the daemon's logs. */
/** A bound for a loaded CI machine (recovery in a sim start can take seconds there), not a speed claim. */
const READY_TIMEOUT_MS = 30_000;
/** How long `stop()` waits for the process to exit before killing it and failing. */
const STOP_TIMEOUT_MS = 10_000;

export interface TestDaemonOptions {
  /** Extra agentd flags; given after the harness's own, so a repeated flag overrides it. */
  args?: string[];
  /** Extra environment (the inherited `AGENTD_*` variables are dropped first). */
  env?: Record<string, string>;
  /** `--host sim` (default true). Never set false in tests: the systemd host runs real commands. */
  sim?: boolean;
  /** `--root` (default `<dir>/root`). */
  root?: string;
  /** Use this directory instead of a fresh temp dir (it is then not removed by the harness). */
  dir?: string;
  /** Socket path (default `<dir>/agentd.sock`). */
  socket?: string;
  /** PID file (default `<dir>/agentd.pid`). */
  pidFile?: string;
  /**
   * Run `agentd --sim` with no path flags, as `npm start` does: every path is then under
   * `<dir>/.agentd/` (the daemon's cwd is `<dir>`). `socket`, `pidFile` and `root` are ignored.
   */
  simDefaults?: boolean;
  /** Wait until /readyz answers (default true); false for a daemon meant to die during startup. */
  waitReady?: boolean;
  /** The agentd program to run with node (default dist/bin/agentd.js, the bundle's npm bin). */
  bin?: string;
  /** An agentd executable to run instead of node with `bin` (the release's). */
  executable?: string;
}

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface TestDaemon {
  /** The temp dir every path lives in (also the daemon's cwd). */
  dir: string;
  socket: string;
  pidFile: string;
  stateDir: string;
  root: string;
  pid: number;
  proc: ChildProcess;
  /** Everything the daemon wrote to stdout and stderr so far. */
  logs(): string;
  /** One JSON-RPC call over the socket; returns the parsed response object. */
  rpc(method: string, params?: unknown): Promise<Record<string, unknown>>;
  /** One HTTP request over the socket. A non-string body is sent as JSON. */
  http(
    method: string,
    urlPath: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<HttpAnswer>;
  /** Signal the daemon and wait for it to exit; returns the exit code (null when killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Wait (up to 10 s, then SIGKILL and fail) for an exit something else caused; returns the exit code. */
  waitExit(): Promise<number | null>;
  /** SIGKILL and wait for the exit. */
  kill(): Promise<void>;
  /** Kill if still running and remove the temp dir (for daemons started in `beforeAll`). */
  dispose(): Promise<void>;
}

interface Tracked {
  proc: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  removeDir: string | null;
}

const live = new Set<Tracked>();

async function release(t: Tracked): Promise<void> {
  if (t.proc.exitCode === null && t.proc.signalCode === null) t.proc.kill('SIGKILL');
  await t.exited;
  live.delete(t);
  if (t.removeDir) await rm(t.removeDir, { recursive: true, force: true });
}

// Safety nets: whatever a test file forgot is killed when the file ends, or when the worker exits.
afterAll(async () => {
  await Promise.all([...live].map(release));
});
process.once('exit', () => {
  for (const t of live) t.proc.kill('SIGKILL');
});

/** Register cleanup for the current test when there is one; otherwise rely on dispose() and the nets. */
function cleanupAfterTest(t: Tracked): void {
  try {
    onTestFinished(() => release(t));
  } catch {
    // Called from beforeAll/describe: the caller disposes (or the file-level afterAll does).
  }
}

/** The proxy variables agentd reads (src/config/proxy.ts): a test sets them itself, or none. */
const PROXY_VARIABLES = /^(https?|no)_proxy$/i;

/** Environment for a child: the test runner's, without any AGENTD_ / AGENTCTL_ or proxy settings. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('AGENTD_') && !k.startsWith('AGENTCTL_') && !PROXY_VARIABLES.test(k)) env[k] = v;
  }
  return { ...env, NO_COLOR: '1', ...extra };
}

function assertBuilt(): void {
  if (!existsSync(AGENTD_BIN)) throw new Error(`${AGENTD_BIN} is missing: run npm run build first`);
}

function track(proc: ChildProcess, removeDir: string | null): Tracked {
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    // 'close', not 'exit': it comes after stdout and stderr are drained, so no output is lost.
    proc.once('close', (code, signal) => resolve({ code, signal }));
  });
  const t: Tracked = { proc, exited, removeDir };
  live.add(t);
  return t;
}

/** One HTTP request over a unix socket. */
export function requestUnix(
  socket: string,
  method: string,
  urlPath: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<HttpAnswer> {
  const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath: socket,
        method,
        path: urlPath,
        headers: { ...(text !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

/** Poll until /readyz answers 200; fail early when the process exits, or after the timeout. */
async function waitReady(socket: string, t: Tracked, logs: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (t.proc.exitCode !== null || t.proc.signalCode !== null) {
      throw new Error(
        `agentd exited (code ${t.proc.exitCode}, signal ${t.proc.signalCode}) before it was ready:\n${logs()}`,
      );
    }
    try {
      const res = await requestUnix(socket, 'GET', '/readyz');
      if (res.status === 200) return;
      last = `HTTP ${res.status} ${res.body}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`agentd was not ready within ${READY_TIMEOUT_MS} ms (${last}):\n${logs()}`);
}

/** Start the built daemon with every path in a temp dir and wait until it is ready. */
export async function startTestDaemon(options: TestDaemonOptions = {}): Promise<TestDaemon> {
  assertBuilt();
  const dir = options.dir ?? (await mkdtemp(path.join(os.tmpdir(), 'agentd-it-')));
  const simDir = path.join(dir, '.agentd');
  const socket = options.simDefaults
    ? path.join(simDir, 'agentd.sock')
    : (options.socket ?? path.join(dir, 'agentd.sock'));
  const pidFile = options.simDefaults
    ? path.join(simDir, 'agentd.pid')
    : (options.pidFile ?? path.join(dir, 'agentd.pid'));
  const stateDir = options.simDefaults ? path.join(simDir, 'state') : path.join(dir, 'state');
  const root = options.simDefaults ? path.join(simDir, 'root') : (options.root ?? path.join(dir, 'root'));
  if (!options.simDefaults) await mkdir(root, { recursive: true });
  // An explicit (empty) config file, so a /etc/agentd/config.yaml on the test machine is never read.
  const configFile = path.join(dir, 'agentd-config.yaml');
  if (!existsSync(configFile)) await writeFile(configFile, '');
  const pathFlags = options.simDefaults
    ? ['--sim']
    : [
        '--socket',
        socket,
        '--pid-file',
        pidFile,
        '--state-dir',
        stateDir,
        '--root',
        root,
        ...(options.sim === false ? [] : ['--host', 'sim']),
      ];
  const args = [
    ...(options.executable ? [] : [options.bin ?? AGENTD_BIN]),
    '--config',
    configFile,
    ...pathFlags,
    '--log-format',
    'json',
    ...(options.args ?? []),
  ];
  const proc = spawn(options.executable ?? process.execPath, args, {
    cwd: dir,
    env: childEnv(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const t = track(proc, options.dir === undefined ? dir : null);
  cleanupAfterTest(t);
  let output = '';
  proc.stdout?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  proc.stderr?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  const logs = (): string => output;
  try {
    if (options.waitReady !== false) await waitReady(socket, t, logs);
  } catch (err) {
    await release(t);
    throw err;
  }

  let nextId = 1;
  const daemon: TestDaemon = {
    dir,
    socket,
    pidFile,
    stateDir,
    root,
    pid: proc.pid as number,
    proc,
    logs,
    async rpc(method, params) {
      const res = await requestUnix(socket, 'POST', '/rpc', {
        jsonrpc: '2.0',
        id: nextId++,
        method,
        ...(params === undefined ? {} : { params }),
      });
      return JSON.parse(res.body) as Record<string, unknown>;
    },
    http: (method, urlPath, body, headers) => requestUnix(socket, method, urlPath, body, headers),
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return daemon.waitExit();
    },
    async waitExit() {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>(
        (r) => (timer = setTimeout(() => r('timeout'), STOP_TIMEOUT_MS)),
      );
      const result = await Promise.race([t.exited, timedOut]);
      clearTimeout(timer);
      if (result === 'timeout') {
        proc.kill('SIGKILL');
        await t.exited;
        throw new Error(`agentd did not exit within ${STOP_TIMEOUT_MS} ms:\n${logs()}`);
      }
      return result.code;
    },
    async kill() {
      proc.kill('SIGKILL');
      await t.exited;
    },
    dispose: () => release(t),
  };
  return daemon;
}

export interface AgentdRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** True when the process had to be killed because it did not exit in time. */
  timedOut: boolean;
}

/**
 * Run agentd with exactly these arguments and wait for it to exit (for start-up failures). A
 * daemon that unexpectedly starts is killed after `timeoutMs` and reported with `timedOut`.
 */
export async function runAgentd(
  args: string[],
  options: {
    env?: Record<string, string>;
    cwd?: string;
    timeoutMs?: number;
    /** Run as this user (needs root): for what root may always do, such as write any directory. */
    user?: { uid: number; gid: number };
  } = {},
): Promise<AgentdRun> {
  assertBuilt();
  const node = options.user ? await nodeRunnableBy(options.user) : process.execPath;
  const proc = spawn(node, [AGENTD_BIN, ...args], {
    cwd: options.cwd ?? os.tmpdir(),
    env: childEnv(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
    ...options.user,
  });
  // A program that cannot be started (EACCES, ENOENT) fails the call instead of hanging it.
  const spawnFailed = new Promise<never>((_, reject) =>
    proc.once('error', (err) => reject(new Error(`cannot start agentd with ${node}: ${err.message}`))),
  );
  const t = track(proc, null);
  let stdout = '';
  let stderr = '';
  proc.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  proc.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill('SIGKILL');
  }, options.timeoutMs ?? 10_000);
  try {
    const { code, signal } = await Promise.race([t.exited, spawnFailed]);
    return { code, signal, stdout, stderr, timedOut };
  } finally {
    clearTimeout(timer);
    live.delete(t);
  }
}

/**
 * This Node runtime, or a copy of it that `user` may execute: the second runtime of the tests
 * lives in root's home (`~/.cache/agentd`, mode 0700), which another user cannot enter. The copy
 * goes in a temp dir removed when the test ends.
 */
async function nodeRunnableBy(user: { uid: number; gid: number }): Promise<string> {
  const probe = spawnSync(process.execPath, ['-e', '0'], { ...user, stdio: 'ignore' });
  if (!probe.error && probe.status === 0) return process.execPath;
  const dir = await makeTempDir('agentd-node-');
  await chmod(dir, 0o755);
  const copy = path.join(dir, 'node');
  await copyFile(process.execPath, copy);
  await chmod(copy, 0o755);
  return copy;
}

/** A fresh temp dir removed when the current test ends (or, outside a test, by the caller). */
export async function makeTempDir(prefix = 'agentd-it-'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  try {
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
  } catch {
    // Outside a test: the caller removes it.
  }
  return dir;
}

/** A helper process a test starts (a fake agentd, or a foreign program such as `sleep`). */
export interface HelperProcess {
  pid: number;
  proc: ChildProcess;
  /** Whether it is still running (exited processes are reaped by node at once). */
  alive(): boolean;
  /** Resolves with the exit code and signal once it has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function helper(proc: ChildProcess): HelperProcess {
  const t = track(proc, null);
  cleanupAfterTest(t);
  return {
    pid: proc.pid as number,
    proc,
    alive: () => proc.exitCode === null && proc.signalCode === null,
    exited: t.exited,
  };
}

/** A program that is not agentd: `sleep 30`, killed when the test ends. */
export function spawnForeignProcess(): HelperProcess {
  return helper(spawn('sleep', ['30'], { stdio: 'ignore' }));
}

/**
 * A process whose command line looks like agentd's (`node <dir>/agentd.js`) and that just
 * waits. On SIGTERM it exits 0, or with `ignoreSigterm` it carries on (only SIGKILL stops it).
 * Resolves once its signal handler is installed, so a test's SIGTERM never races the start-up.
 */
export async function spawnFakeAgentd(
  dir: string,
  options: { ignoreSigterm?: boolean } = {},
): Promise<HelperProcess> {
  const script = path.join(dir, 'agentd.js');
  await writeFile(
    script,
    [
      options.ignoreSigterm
        ? "process.on('SIGTERM', () => process.stdout.write('ignored SIGTERM\\n'));"
        : "process.on('SIGTERM', () => process.exit(0));",
      'setInterval(() => {}, 60_000);',
      "process.stdout.write('ready\\n');",
    ].join('\n'),
  );
  const proc = spawn(process.execPath, [script], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
  const h = helper(proc);
  await new Promise<void>((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (c: Buffer) => {
      out += c.toString('utf8');
      if (out.includes('ready\n')) resolve();
    });
    void h.exited.then(({ code, signal }) =>
      reject(new Error(`fake agentd exited early (${code}, ${signal})`)),
    );
  });
  return h;
}

/** A PID that no process can have: the kernel hands out PIDs below pid_max. */
export function impossiblePid(): number {
  const max = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim());
  return max + 1;
}

/**
 * Poll (real time: the daemon is another process) until `check` holds, for at most 20 s; on
 * timeout the error names what was awaited and, given a daemon, ends with its recent logs.
 */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  d?: TestDaemon,
): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${d ? `\n${d.logs().slice(-4000)}` : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** What a process recorded about its runtime (see `runtimeRecorder`). */
export interface RuntimeRecord {
  /** The node built-in modules loaded by exit (`process.moduleLoadList`). */
  builtins: string[];
  /** V8's flag hash in its code caches (bytes 12 to 15 of a cache's header) at start and at exit. */
  flagHashAtStart: string;
  flagHashAtExit: string;
}

/**
 * A preload (`node --require <preload>`, or `NODE_OPTIONS`) that records at the process's exit
 * what it loaded and its V8 flag hash; `read()` returns the record once the process has exited.
 */
export async function runtimeRecorder(): Promise<{ preload: string; read(): Promise<RuntimeRecord> }> {
  const dir = await makeTempDir('agentd-runtime-record-');
  const log = path.join(dir, 'record.json');
  const preload = path.join(dir, 'record.cjs');
  await writeFile(
    preload,
    [
      "const hash = () => new (require('node:vm').Script)('').createCachedData().subarray(12, 16).toString('hex');",
      'const flagHashAtStart = hash();',
      "process.on('exit', () => {",
      "  const builtins = process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice(13));",
      `  require('node:fs').writeFileSync(${JSON.stringify(log)}, JSON.stringify({ builtins, flagHashAtStart, flagHashAtExit: hash() }));`,
      '});',
    ].join('\n'),
  );
  return {
    preload,
    read: async () => JSON.parse(await readFile(log, 'utf8')) as RuntimeRecord,
  };
}
