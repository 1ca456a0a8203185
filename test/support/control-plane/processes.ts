/**
 * The processes of the control plane: each started in a process group of its own (so a
 * SIGKILL to the group takes whatever it forked too), announced to a reaper (`reaper.sh`) that
 * kills every group still running and removes the temp dir when the test process closes its
 * pipe — on an orderly stop, and when the vitest worker dies however it dies. A process `exit`
 * hook kills them too, for the exits that run it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import net from 'node:net';

const REAPER = fileURLToPath(new URL('./reaper.sh', import.meta.url));

export interface Reaper {
  group(pgid: number): void;
  forget(pgid: number): void;
  dir(path: string): void;
  /** Close the pipe: the reaper kills what is left and removes the dirs; resolves when done. */
  close(): Promise<void>;
}

const openReapers = new Set<ChildProcess>();
const liveGroups = new Set<number>();
process.once('exit', () => {
  for (const g of liveGroups) {
    try {
      process.kill(-g, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  for (const r of openReapers) r.stdin?.end();
});

export function startReaper(): Reaper {
  const proc = spawn('sh', [REAPER], { detached: true, stdio: ['pipe', 'pipe', 'inherit'] });
  proc.unref();
  openReapers.add(proc);
  const done = new Promise<void>((resolve) => proc.once('close', () => resolve()));
  const say = (line: string): void => {
    proc.stdin?.write(`${line}\n`);
  };
  return {
    group: (pgid) => say(`group ${pgid}`),
    forget: (pgid) => say(`forget ${pgid}`),
    dir: (p) => say(`dir ${p}`),
    async close() {
      // Unreferenced so that it never keeps a test process alive, but waited for here: a process
      // with nothing else to do (a bench after its last run) would otherwise exit in this await.
      proc.ref();
      proc.stdin?.end();
      await done;
      openReapers.delete(proc);
    },
  };
}

export interface ManagedProcess {
  name: string;
  proc: ChildProcess;
  pid: number;
  /** Everything it wrote so far (the last 200 kB). */
  logs(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  running(): boolean;
  /** SIGTERM, then SIGKILL to the group after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL to the group, no grace: a crash. */
  kill(): Promise<void>;
}

const LOG_LIMIT = 200_000;

export function startProcess(
  reaper: Reaper,
  name: string,
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): ManagedProcess {
  const proc = spawn(file, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env });
  if (proc.pid === undefined) throw new Error(`${name}: could not start ${file}`);
  const pid = proc.pid;
  reaper.group(pid);
  liveGroups.add(pid);
  let output = '';
  const append = (c: Buffer): void => {
    output += c.toString('utf8');
    if (output.length > LOG_LIMIT) output = output.slice(-LOG_LIMIT);
  };
  proc.stdout?.on('data', append);
  proc.stderr?.on('data', append);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.once('close', (code, signal) => {
      liveGroups.delete(pid);
      reaper.forget(pid);
      resolve({ code, signal });
    });
  });
  const running = (): boolean => proc.exitCode === null && proc.signalCode === null;
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-pid, signal);
    } catch {
      // The group is gone already.
    }
  };
  return {
    name,
    proc,
    pid,
    logs: () => output,
    exited,
    running,
    async stop(graceMs = 5_000) {
      if (!running()) return;
      signalGroup('SIGTERM');
      const timer = setTimeout(() => signalGroup('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
    async kill() {
      signalGroup('SIGKILL');
      await exited;
    },
  };
}

/** A TCP port free on 127.0.0.1 right now (the kernel's pick). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Poll `check` every 100 ms until it answers true; fail naming `what` (and the logs) after `timeoutMs`. */
export async function pollUntil(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  p?: ManagedProcess,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    if (p && !p.running()) {
      throw new Error(
        `${p.name} exited (${String(p.proc.exitCode ?? p.proc.signalCode)}) before ${what}:\n${p.logs().slice(-6000)}`,
      );
    }
    try {
      if (await check()) return;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (${last})` : ''}${p ? `:\n${p.logs().slice(-6000)}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
