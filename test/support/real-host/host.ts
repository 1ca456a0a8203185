/**
 * A real systemd host for tests: a Debian rootfs booted with `systemd-nspawn --boot` in a cgroup
 * and a network namespace of its own, with real systemd (PID 1 of the container), real machined
 * and real nested `systemd-nspawn` machines. This machine's PID 1 need not be systemd: the host
 * is launched with `--keep-unit --register=no`, so nspawn needs no outer systemd or D-Bus.
 *
 * Isolation: every host has its own name, cgroup (`/sys/fs/cgroup[/unified|/systemd]/<name>`),
 * network namespace (`ip netns`, only `lo`: the registry and mirror of a test run there too, so
 * parallel runs never collide on ports such as kubelet's 10248) and temp directory. Nothing of
 * this machine's /etc, /var/lib/machines or systemd is touched.
 *
 * Teardown is owned by a reaper process (`reaper.sh`) started first, in a session of its own,
 * holding a pipe from the test process: when the harness closes the pipe, or the test runner
 * dies and the kernel closes it, the reaper kills everything in the cgroup, removes the cgroup,
 * the network namespace and the directory. `stop()` first powers the host off cleanly.
 *
 * docs/testing.md describes the suite; the measured facts behind the flags are there too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { ensureBaseTarball } from './rootfs.js';
import { run, runOk, type RunResult } from './run.js';

const REAPER = fileURLToPath(new URL('./reaper.sh', import.meta.url));
const IN_HOST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface RealHostOptions {
  /** A short label that goes into the host's name (letters, digits, dashes). */
  label: string;
  /** Extra `systemd-nspawn` arguments, e.g. `--bind-ro=/usr/bin/node`. */
  nspawnArgs?: string[];
  /** Called with the host's rootfs before it boots (install files, write config). */
  prepare?: (rootfs: string) => Promise<void>;
}

export interface ExecOptions {
  /** Text for the command's stdin. */
  input?: string;
  /** Default 120 s. */
  timeoutMs?: number;
  /** Extra environment (the command otherwise starts with `env -i PATH=…`). */
  env?: Record<string, string>;
  /** Working directory inside the host (default /). */
  cwd?: string;
}

/** A booted host. Run commands in it with `exec`; always `stop()` it. */
export interface RealHost {
  readonly name: string;
  /** The temp directory holding everything of this host. */
  readonly dir: string;
  /** The host's root directory as seen from outside. */
  readonly rootfs: string;
  /** The network namespace the host, its machines, and the test's servers share. */
  readonly netns: string;
  /** PID (outside) of the host's systemd. */
  readonly leader: number;
  /** A path outside the host that reaches `p` inside it (through /proc/<leader>/root). */
  outside(p: string): string;
  /** Run a command inside the host (all its namespaces), with a clean environment. */
  exec(argv: string[], options?: ExecOptions): Promise<RunResult>;
  /** `exec`, failing with the command's output unless it exits 0. */
  execOk(argv: string[], options?: ExecOptions): Promise<RunResult>;
  /** `argv` prefixed to run outside the host but in its network namespace (skopeo, curl). */
  inNetns(argv: string[]): string[];
  /**
   * Start a long-running helper (registry, mirror) outside the host, in its network namespace
   * and in a cgroup below the host's, so the reaper ends it with the host.
   */
  spawnHelper(argv: string[], options?: { cwd?: string; env?: NodeJS.ProcessEnv }): ChildProcess;
  /** The console log of the host so far (for failure messages). */
  consoleLog(): Promise<string>;
  /** Power off the host and remove every trace of it. Idempotent. */
  stop(): Promise<void>;
}

/** Which cgroup roots this machine has: hybrid v1 (`systemd` + `unified`) or pure v2. */
function cgroupRoots(): string[] {
  if (existsSync('/sys/fs/cgroup/unified') && existsSync('/sys/fs/cgroup/systemd')) {
    return ['/sys/fs/cgroup/unified', '/sys/fs/cgroup/systemd'];
  }
  if (existsSync('/sys/fs/cgroup/cgroup.controllers')) return ['/sys/fs/cgroup'];
  throw new Error('real host: no usable cgroup hierarchy under /sys/fs/cgroup (need cgroup v2 or hybrid)');
}

let counter = 0;

/** Boot a host. Rejects (after cleaning up) when it does not reach `running` or `degraded`. */
export async function bootRealHost(options: RealHostOptions): Promise<RealHost> {
  const base = await ensureBaseTarball();
  const label = options.label.replace(/[^a-z0-9-]/gi, '').slice(0, 20) || 'host';
  // Host names double as cgroup, netns and nspawn machine names: short, unique per run and test.
  const name = `agentd-rh-${label}-${process.pid}-${counter++}-${randomBytes(2).toString('hex')}`.slice(
    0,
    63,
  );
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-real-host-'));
  const rootfs = path.join(dir, 'root');
  const roots = cgroupRoots();

  // The reaper first: from here on, whatever happens to this process, the host goes away.
  const reaper = spawn('bash', [REAPER, name, name, dir], {
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
  });
  reaper.unref();
  let stopped: Promise<void> | undefined;
  let nspawn: ChildProcess | undefined;
  const consoleFile = path.join(dir, 'console.log');

  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      if (nspawn && nspawn.exitCode === null && nspawn.signalCode === null) {
        // SIGTERM to nspawn powers the host off cleanly (its machines too); 1–3 s when healthy.
        nspawn.kill('SIGTERM');
        await Promise.race([exited(nspawn), delay(15_000)]);
      }
      const reaped = exited(reaper);
      reaper.stdin?.end();
      await Promise.race([reaped, delay(30_000)]);
    })());

  try {
    await runOk('ip', ['netns', 'add', name]);
    await runOk('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    await mkdir(rootfs);
    await runOk('tar', ['--zstd', '-xpf', base, '--numeric-owner', '-C', rootfs], { timeoutMs: 180_000 });
    await writeFile(path.join(rootfs, 'etc/hostname'), `${name}\n`);
    await writeFile(path.join(rootfs, 'etc/machine-id'), `${randomBytes(16).toString('hex')}\n`);
    // A real node has /lib/modules; the machines' .nspawn files bind it read-only.
    await mkdir(path.join(rootfs, 'usr/lib/modules'), { recursive: true });
    await options.prepare?.(rootfs);

    for (const r of roots) await mkdir(path.join(r, name, 'helpers'), { recursive: true });
    const enter = roots.map((r) => `echo $$ > ${path.join(r, name, 'cgroup.procs')}`).join(' && ');
    const args = [
      '-D',
      rootfs,
      '-M',
      name,
      '--boot',
      '--keep-unit',
      '--register=no',
      '--capability=all',
      '--system-call-filter=bpf',
      '--system-call-filter=@keyring',
      '--private-users=no',
      `--network-namespace-path=/run/netns/${name}`,
      '--console=pipe',
      ...(options.nspawnArgs ?? []),
    ];
    const log = createWriteStream(consoleFile);
    // bash moves itself into the host's cgroups, then becomes nspawn (same PID).
    nspawn = spawn('bash', ['-c', `${enter} && exec systemd-nspawn "$@"`, 'nspawn', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { PATH: process.env.PATH ?? IN_HOST_PATH, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY: '1' },
    });
    nspawn.stdout?.pipe(log);
    nspawn.stderr?.pipe(log);
    const leader = await waitForLeader(nspawn, consoleFile);

    const exec = async (argv: string[], o: ExecOptions = {}): Promise<RunResult> => {
      const env = Object.entries({ PATH: IN_HOST_PATH, ...o.env }).map(([k, v]) => `${k}=${v}`);
      // `env -C`, not nsenter's --wd: nsenter opens that directory before it enters the host.
      const cd = o.cwd ? ['-C', o.cwd] : [];
      return run('nsenter', ['-t', String(leader), '-a', '--', 'env', '-i', ...cd, ...env, ...argv], {
        input: o.input,
        timeoutMs: o.timeoutMs ?? 120_000,
      });
    };
    const host: RealHost = {
      name,
      dir,
      rootfs,
      netns: name,
      leader,
      outside: (p) => path.join(`/proc/${leader}/root`, p),
      exec,
      execOk: async (argv, o) => {
        const res = await exec(argv, o);
        if (res.exitCode !== 0) {
          throw new Error(
            `in host ${name}: ${argv.join(' ')} exited ${res.exitCode}\n${res.stdout}${res.stderr}`,
          );
        }
        return res;
      },
      inNetns: (argv) => ['ip', 'netns', 'exec', name, ...argv],
      spawnHelper: (argv, o = {}) => {
        const join = roots
          .map((r) => `echo $$ > ${path.join(r, name, 'helpers', 'cgroup.procs')}`)
          .join(' && ');
        return spawn('bash', ['-c', `${join} && exec ip netns exec ${name} "$@"`, 'helper', ...argv], {
          stdio: ['ignore', 'pipe', 'pipe'],
          cwd: o.cwd,
          env: o.env ?? process.env,
        });
      },
      consoleLog: () => readFile(consoleFile, 'utf8').catch(() => ''),
      stop,
    };
    const state = await exec(['systemctl', 'is-system-running', '--wait'], { timeoutMs: 60_000 });
    if (!['running', 'degraded'].includes(state.stdout.trim())) {
      throw new Error(`host ${name} did not boot: is-system-running says ${state.stdout.trim()}`);
    }
    return host;
  } catch (err) {
    const consoleText = await readFile(consoleFile, 'utf8').catch(() => '');
    await stop();
    throw new Error(`boot real host ${name}: ${(err as Error).message}\n--- console ---\n${consoleText}`, {
      cause: err,
    });
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** The container's PID 1 (systemd), once its private bus socket exists. */
async function waitForLeader(nspawn: ChildProcess, consoleFile: string): Promise<number> {
  const deadline = Date.now() + 60_000;
  const pid = nspawn.pid;
  if (pid === undefined) throw new Error('systemd-nspawn did not start');
  while (Date.now() < deadline) {
    if (nspawn.exitCode !== null || nspawn.signalCode !== null) {
      const text = await readFile(consoleFile, 'utf8').catch(() => '');
      throw new Error(`systemd-nspawn exited (${nspawn.exitCode ?? nspawn.signalCode}):\n${text}`);
    }
    const children = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '');
    const leader = Number(children.trim().split(/\s+/)[0]);
    if (leader > 0) {
      const comm = await readFile(`/proc/${leader}/comm`, 'utf8').catch(() => '');
      if (comm.trim() === 'systemd' && existsSync(`/proc/${leader}/root/run/systemd/private`)) return leader;
    }
    await delay(50);
  }
  throw new Error('the host did not start systemd within 60 s');
}
