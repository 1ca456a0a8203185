/**
 * `agentctl uninstall` against a `--root` tree: the real daemon (`--sim`) with a joined node,
 * the machine commands run by agentctl itself through the sim executables first on PATH, and
 * the PID-file cases: a daemon that ignores SIGTERM, a stale PID file, a PID that is not agentd,
 * and a PID file that does not name the agentd that runs (refused before anything changes).
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile, chmod } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installSimBinaries, simBinDistDir } from '../../src/sim/bin/install.js';
import { runAgentctl, type CliRun } from '../support/cli.js';
import {
  impossiblePid,
  makeTempDir,
  spawnFakeAgentd,
  spawnForeignProcess,
  type TestDaemon,
} from '../support/daemon.js';
import { snapshotTree, startSimDaemon } from '../support/provision-fixtures.js';

interface Step {
  step: string;
  ok: boolean;
  skipped: boolean;
  detail: string;
  data?: Record<string, unknown>;
}
interface Report {
  ok: boolean;
  steps: Step[];
}

let simBin: string;
beforeAll(async () => {
  if (!existsSync(path.join(simBinDistDir(), 'machinectl.js'))) throw new Error('run npm run build first');
  simBin = await makeTempDir('agentctl-simbin-');
  await installSimBinaries(simBin);
});
// Made in beforeAll, outside any test: makeTempDir leaves it to us.
afterAll(() => rm(simBin, { recursive: true, force: true }));

/** agentctl uninstall with the sim's machinectl/systemctl/systemd-run first on PATH. */
function uninstall(
  o: { root: string; stateDir?: string; pidFile: string; socket?: string; pathFirst?: string; host?: string },
  ...args: string[]
): Promise<CliRun> {
  return runAgentctl(
    [
      '--json',
      ...(o.socket ? ['--socket', o.socket] : []),
      'uninstall',
      '--yes',
      '--root',
      o.root,
      '--pid-file',
      o.pidFile,
      ...(o.stateDir ? ['--state-dir', o.stateDir] : []),
      // Without a daemon to ask, the host is named: the sim executables on PATH stand in for systemd.
      ...(o.host ? ['--host', o.host] : o.socket ? [] : ['--host', 'systemd']),
      ...args,
    ],
    {
      env: {
        PATH: [o.pathFirst, simBin, process.env.PATH].filter(Boolean).join(path.delimiter),
        AGENTD_SIM_ROOT: o.root,
      },
    },
  );
}

const step = (report: Report, name: string): Step | undefined => report.steps.find((s) => s.step === name);

/** The files an installed, joined node has besides what the daemon wrote. */
async function addInstallFiles(root: string): Promise<string[]> {
  const files = ['/etc/systemd/system/agentd.service', '/etc/agentd/config.yaml'].map((f) =>
    path.join(root, f),
  );
  for (const f of files) {
    await mkdir(path.dirname(f), { recursive: true });
    await writeFile(f, '# test\n');
  }
  return files;
}

async function joinedDaemon(): Promise<TestDaemon> {
  const d = await startSimDaemon();
  const join = await runAgentctl(['--socket', d.socket, 'update']);
  expect(join.code, join.stderr).toBe(0);
  return d;
}

describe('uninstall with a running daemon', () => {
  it('stops it, removes both machines and every file, and reports each step (exit 0)', async () => {
    const d = await joinedDaemon();
    const extra = await addInstallFiles(d.root);
    const machineDir = path.join(d.root, 'var/lib/machines/kube1');
    const applied = path.join(d.root, 'etc/unbounded/agent/kube1-applied-config.json');
    expect(existsSync(machineDir) && existsSync(applied)).toBe(true);

    const r = await uninstall({ root: d.root, stateDir: d.stateDir, pidFile: d.pidFile, socket: d.socket });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as Report;
    expect(report.ok).toBe(true);
    expect(report.steps.map((s) => [s.step, s.ok])).toEqual([
      ['disable-unit', true],
      ['stop-daemon', true],
      ['remove-machine-kube1', true],
      ['remove-machine-kube2', true],
      ['remove-nspawn-files', true],
      ['remove-configs', true],
      ['remove-upstream-agent', true],
      ['remove-state', true],
      ['remove-runtime', true],
      ['remove-unit', true],
      ['daemon-reload', true],
    ]);
    // A --sim daemon: the simulated host has no unit, whether or not systemd runs here, and the
    // skipped steps say that (not that systemd is not running).
    for (const name of ['disable-unit', 'daemon-reload'])
      expect(step(report, name), name).toMatchObject({
        skipped: true,
        detail: 'the simulated host (--host sim) has no systemd unit of agentd: skipped',
      });
    expect(step(report, 'stop-daemon')).toMatchObject({
      data: { pid: d.pid, signalled: true, forceKilled: false },
    });
    expect(await d.waitExit()).toBe(0);
    expect(step(report, 'remove-machine-kube1')?.detail).toBe('kube1 stopped and removed');
    for (const gone of [machineDir, applied, d.stateDir, d.pidFile, d.socket, ...extra])
      expect(existsSync(gone), gone).toBe(false);
    // Progress went to stderr, one line per step.
    expect(r.stderr).toMatch(/^ok {6}stop-daemon: agentd \(pid \d+\) stopped \(SIGTERM\)$/m);
  });

  it("a --sim daemon's own state dir is removed without --state-dir, and the last line says where", async () => {
    const d = await joinedDaemon();
    expect(existsSync(path.join(d.stateDir, '.agentd-state-dir'))).toBe(true);
    const r = await runAgentctl(
      ['--socket', d.socket, 'uninstall', '--yes', '--root', d.root, '--pid-file', d.pidFile],
      { env: { AGENTD_SIM_ROOT: d.root } },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`ok      remove-state: removed ${d.stateDir}\n`);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe(
      `agentd is uninstalled from the simulated host under ${d.root}`,
    );
    expect(existsSync(d.stateDir)).toBe(false);
    expect(await d.waitExit()).toBe(0);
  });

  it("a state dir without agentd's marker is refused, named, and kept; uninstall says it is not complete", async () => {
    const dir = await makeTempDir();
    const root = path.join(dir, 'root');
    const stateDir = path.join(dir, 'precious');
    await mkdir(stateDir, { recursive: true });
    await writeFile(path.join(stateDir, 'thesis.tex'), 'years of work');
    const r = await runAgentctl(
      [
        'uninstall',
        '--yes',
        '--host',
        'systemd',
        '--root',
        root,
        '--state-dir',
        stateDir,
        '--pid-file',
        path.join(dir, 'agentd.pid'),
      ],
      { env: { PATH: `${simBin}${path.delimiter}${process.env.PATH}`, AGENTD_SIM_ROOT: root } },
    );
    expect(r.code).not.toBe(0);
    expect(r.stdout).toContain(
      `FAILED  remove-state: refusing to remove ${stateDir}: it does not carry agentd's marker`,
    );
    expect(r.stdout).not.toContain('agentd is uninstalled');
    expect(await readFile(path.join(stateDir, 'thesis.tex'), 'utf8')).toBe('years of work');
  });

  it('--keep-config keeps the applied config and /etc/agentd; human output lists the steps', async () => {
    // No daemon and no machine here: an installed node's files only.
    const dir = await makeTempDir();
    const root = path.join(dir, 'root');
    await addInstallFiles(root);
    const applied = path.join(root, 'etc/unbounded/agent/kube1-applied-config.json');
    const nspawn = path.join(root, 'etc/systemd/nspawn/kube1.nspawn');
    for (const f of [applied, nspawn]) {
      await mkdir(path.dirname(f), { recursive: true });
      await writeFile(f, '{}');
    }
    const r = await runAgentctl(
      [
        'uninstall',
        '--yes',
        '--keep-config',
        '--host',
        'systemd',
        '--root',
        root,
        '--pid-file',
        path.join(dir, 'agentd.pid'),
      ],
      { env: { PATH: `${simBin}${path.delimiter}${process.env.PATH}`, AGENTD_SIM_ROOT: root } },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      `ok      stop-daemon: no PID file at ${path.join(dir, 'agentd.pid')}: nothing to stop; no agentd runs (its instance lock is free)\n`,
    );
    expect(r.stdout).toMatch(/^ok {6}remove-machine-kube1: kube1 is absent$/m);
    expect(r.stdout).toMatch(/^skip {4}remove-configs: kept \(--keep-config\)/m);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('agentd is uninstalled');
    expect(existsSync(applied)).toBe(true);
    expect(existsSync(path.join(root, 'etc/agentd/config.yaml'))).toBe(true);
    expect(existsSync(nspawn)).toBe(false);
    expect(existsSync(path.join(root, 'etc/systemd/system/agentd.service'))).toBe(false);
  });
});

describe('uninstall acts on exactly the host its daemon manages', () => {
  it("refuses --host systemd for a --sim daemon, and a --root that is not the daemon's; nothing removed", async () => {
    const d = await joinedDaemon();
    const machineDir = path.join(d.root, 'var/lib/machines/kube1');
    const o = { root: d.root, stateDir: d.stateDir, pidFile: d.pidFile, socket: d.socket };
    const wrongHost = await uninstall(o, '--host', 'systemd');
    expect(wrongHost.code, wrongHost.stderr).toBe(2);
    expect(wrongHost.stderr).toContain('--host systemd does not match');
    expect(JSON.parse(wrongHost.stdout)).toMatchObject({
      error: { code: 'HOST_MISMATCH', daemonHost: 'sim' },
    });
    const other = await makeTempDir();
    const wrongRoot = await uninstall({ ...o, root: other });
    expect(wrongRoot.code, wrongRoot.stderr).toBe(2);
    expect(JSON.parse(wrongRoot.stdout)).toMatchObject({
      error: { code: 'ROOT_MISMATCH', daemonRoot: d.root },
    });
    expect(existsSync(machineDir)).toBe(true);
    expect(d.proc.exitCode).toBeNull();
    // Without PATH stand-ins: the --sim daemon's machines are removed through the simulated host.
    const r = await runAgentctl(
      [
        '--json',
        '--socket',
        d.socket,
        'uninstall',
        '--yes',
        '--root',
        d.root,
        '--pid-file',
        d.pidFile,
        '--state-dir',
        d.stateDir,
      ],
      {},
    );
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(machineDir)).toBe(false);
  });

  it('with no daemon answering, the host must be named', async () => {
    const dir = await makeTempDir();
    const r = await runAgentctl([
      '--json',
      '--socket',
      path.join(dir, 'none.sock'),
      'uninstall',
      '--yes',
      '--root',
      path.join(dir, 'root'),
      '--pid-file',
      path.join(dir, 'agentd.pid'),
    ]);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: 'HOST_REQUIRED' } });
    expect(r.stderr).toContain('--host systemd');
  });
});

describe('uninstall and the PID file', () => {
  it('a daemon that ignores SIGTERM is force-killed after the grace period, and the report says so', async () => {
    const dir = await makeTempDir();
    const fake = await spawnFakeAgentd(dir, { ignoreSigterm: true });
    const pidFile = path.join(dir, 'agentd.pid');
    await writeFile(pidFile, `${fake.pid}\n`);
    const r = await uninstall({ root: path.join(dir, 'root'), pidFile }, '--grace', '300ms');
    expect(r.code, r.stderr).toBe(0);
    const stop = step(JSON.parse(r.stdout) as Report, 'stop-daemon');
    expect(stop).toMatchObject({ ok: true, data: { pid: fake.pid, signalled: true, forceKilled: true } });
    expect(stop?.detail).toContain('force-killed (SIGKILL)');
    expect((await fake.exited).signal).toBe('SIGKILL');
    expect(existsSync(pidFile)).toBe(false);
  });

  it('a stale PID file: nothing to stop, the rest goes ahead', async () => {
    const dir = await makeTempDir();
    const pidFile = path.join(dir, 'agentd.pid');
    const pid = impossiblePid();
    await writeFile(pidFile, `${pid}\n`);
    const r = await uninstall({ root: path.join(dir, 'root'), pidFile });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as Report;
    expect(step(report, 'stop-daemon')).toMatchObject({ ok: true, data: { pid, signalled: false } });
    expect(step(report, 'stop-daemon')?.detail).toContain('is not running: nothing to stop');
    expect(report.ok).toBe(true);
  });

  it("garbage in the PID file and no agentd running: nothing signalled, and the file, not agentd's, is kept", async () => {
    const dir = await makeTempDir();
    const pidFile = path.join(dir, 'agentd.pid');
    await writeFile(pidFile, 'garbage\n');
    const r = await uninstall({ root: path.join(dir, 'root'), pidFile });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as Report;
    expect(step(report, 'stop-daemon')?.detail).toBe(
      `the PID file ${pidFile} does not hold a PID ("garbage"): nothing was signalled; no agentd runs (its instance lock is free)`,
    );
    expect(step(report, 'remove-runtime')?.detail).toContain(
      `kept ${pidFile}: it holds no PID, so it is not agentd's PID file`,
    );
    expect(await readFile(pidFile, 'utf8')).toBe('garbage\n');
  });

  it('a PID file naming a live process that is not agentd: it is not signalled', async () => {
    const dir = await makeTempDir();
    const sleeper = spawnForeignProcess();
    const pidFile = path.join(dir, 'agentd.pid');
    await writeFile(pidFile, `${sleeper.pid}\n`);
    const r = await uninstall({ root: path.join(dir, 'root'), pidFile }, '--grace', '100ms');
    expect(r.code, r.stderr).toBe(0);
    const stop = step(JSON.parse(r.stdout) as Report, 'stop-daemon');
    expect(stop).toMatchObject({
      ok: true,
      data: { pid: sleeper.pid, signalled: false, forceKilled: false },
    });
    expect(stop?.detail).toContain('is not agentd');
    expect(sleeper.alive()).toBe(true);
  });

  it('a PID file that cannot be read: refused naming it before any step, nothing changed (exit 1)', async () => {
    const dir = await makeTempDir();
    const root = path.join(dir, 'root');
    await addInstallFiles(root);
    const before = await snapshotTree(root);
    const pidFile = path.join(dir, 'agentd.pid');
    await mkdir(pidFile);
    const r = await uninstall({ root, pidFile });
    expect(r.code, r.stderr).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: {
        code: 'PID_FILE_UNREADABLE',
        message: `--pid-file ${pidFile}: the path is a directory; the PID file must be a regular file (or not exist yet); pass the PID file agentd writes with --pid-file`,
      },
    });
    expect(r.stderr).not.toMatch(/stop-daemon|disable-unit/);
    expect(await snapshotTree(root)).toEqual(before);
  });
});

describe('uninstall and a PID file that does not name the running agentd', () => {
  /** A joined --sim daemon with the files of an install, and everything under its root and dir. */
  async function installed(): Promise<{ d: TestDaemon; snapshot: () => Promise<Record<string, string>> }> {
    const d = await joinedDaemon();
    await addInstallFiles(d.root);
    // The daemon's log and its socket are its own business; everything else must stay as it is.
    return { d, snapshot: () => snapshotTree(d.dir, { ignore: ['agentd.sock'] }) };
  }

  it('garbage in its PID file: refused (by the socket, and by the instance lock alone), nothing changed', async () => {
    const { d, snapshot } = await installed();
    await writeFile(d.pidFile, 'garbage\n');
    const before = await snapshot();
    const o = { root: d.root, stateDir: d.stateDir, pidFile: d.pidFile };
    // The daemon answers on the socket; then no socket answers and only its instance lock tells.
    for (const socket of [d.socket, path.join(d.dir, 'none.sock')]) {
      const r = await uninstall({ ...o, socket, host: 'sim' });
      expect(r.code, r.stderr).toBe(1);
      expect(JSON.parse(r.stdout)).toMatchObject({
        error: { code: 'PID_FILE_MISMATCH', pidFile: d.pidFile, found: 'garbage', pid: d.pid },
      });
      expect(r.stderr).toContain(
        `agentd (pid ${d.pid}) runs for this node — it ${socket === d.socket ? `answers on --socket ${d.socket} and ` : ''}holds the instance lock of --pid-file ${d.pidFile}`,
      );
      expect(r.stderr).toContain(`but the PID file ${d.pidFile} holds no PID ("garbage")`);
      expect(r.stderr).toContain('nothing was changed');
      expect(r.stderr).not.toMatch(/stop-daemon/);
    }
    expect(await snapshot()).toEqual(before);
    expect(d.proc.exitCode, d.logs()).toBeNull();
    expect(await d.stop()).toBe(0);
  });

  it('a PID file of another process, or none where the daemon writes another: refused, nothing changed', async () => {
    const { d, snapshot } = await installed();
    const sleeper = spawnForeignProcess();
    const elsewhere = await makeTempDir();
    const foreign = path.join(elsewhere, 'foreign.pid');
    await writeFile(foreign, `${sleeper.pid}\n`);
    const before = await snapshot();
    const o = { root: d.root, stateDir: d.stateDir, host: 'sim' };
    const r1 = await uninstall({ ...o, pidFile: foreign, socket: d.socket });
    expect(r1.code, r1.stderr).toBe(1);
    expect(JSON.parse(r1.stdout)).toMatchObject({
      error: { code: 'PID_FILE_MISMATCH', found: 'foreign', pid: d.pid, daemonPidFile: d.pidFile },
    });
    expect(r1.stderr).toContain(`pass the PID file it writes: --pid-file ${d.pidFile}`);
    // No socket answers, and the PID file given does not exist: the state dir's lock tells.
    const missing = path.join(elsewhere, 'agentd.pid');
    const r2 = await uninstall({ ...o, pidFile: missing, socket: path.join(elsewhere, 'none.sock') });
    expect(r2.code, r2.stderr).toBe(1);
    expect(JSON.parse(r2.stdout)).toMatchObject({
      error: { code: 'PID_FILE_MISMATCH', pidFile: missing, found: 'absent', pid: d.pid },
    });
    expect(r2.stderr).toContain(`holds the instance lock of --state-dir ${d.stateDir}`);
    expect(await snapshot()).toEqual(before);
    expect(sleeper.alive()).toBe(true);
    sleeper.proc.kill('SIGKILL');
    await sleeper.exited;
    expect(d.proc.exitCode, d.logs()).toBeNull();
    expect(await d.stop()).toBe(0);
  });
});

describe('uninstall when a machine cannot be removed', () => {
  // A join, then two uninstall runs with real host commands (and remove retries): slow on a busy machine.
  it('keeps every file and says so (exit 1); a rerun finishes the job', { timeout: 90_000 }, async () => {
    const d = await joinedDaemon();
    await addInstallFiles(d.root);
    // A machinectl whose `remove` fails and after which machined still lists that machine (as
    // when its container would not go away); every other call is the sim's.
    const broken = await makeTempDir('agentctl-broken-');
    const marker = path.join(broken, 'remove-tried-$2');
    await writeFile(
      path.join(broken, 'machinectl'),
      [
        '#!/bin/sh',
        `if [ "$1" = remove ]; then touch "${marker}"; echo "Failed to remove image $2: No image '$2' known" >&2; exit 1; fi`,
        `if [ "$1" = show ] && [ -e "${marker}" ]; then echo "Name=$2"; exit 0; fi`,
        `exec '${path.join(simBin, 'machinectl')}' "$@"`,
        '',
      ].join('\n'),
    );
    await chmod(path.join(broken, 'machinectl'), 0o755);
    const applied = path.join(d.root, 'etc/unbounded/agent/kube1-applied-config.json');
    // The daemon is not asked (no socket answers): the host is named, so that the broken
    // machinectl on PATH is what runs.
    const o = {
      root: d.root,
      stateDir: d.stateDir,
      pidFile: d.pidFile,
      socket: path.join(broken, 'none.sock'),
      host: 'systemd',
    };

    const first = await uninstall({ ...o, pathFirst: broken });
    const report = JSON.parse(first.stdout) as Report;
    expect(step(report, 'remove-machine-kube1')).toMatchObject({ ok: false, skipped: false });
    expect(step(report, 'remove-machine-kube1')?.detail).toContain('still registered');
    expect(first.code).toBe(1);
    expect(report.ok).toBe(false);
    for (const name of ['remove-nspawn-files', 'remove-configs', 'remove-state', 'remove-unit']) {
      expect(step(report, name)).toMatchObject({ ok: false, skipped: true });
      expect(step(report, name)?.detail).toContain('the machines could not be removed');
    }
    expect(existsSync(applied)).toBe(true);
    expect(existsSync(path.join(d.root, 'etc/systemd/system/agentd.service'))).toBe(true);

    const rerun = await uninstall(o);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect((JSON.parse(rerun.stdout) as Report).ok).toBe(true);
    expect(existsSync(applied)).toBe(false);
  });
});

describe('uninstall where systemd runs', () => {
  it('disables the unit first and reloads systemd last (a recording systemctl)', async () => {
    const dir = await makeTempDir();
    const root = path.join(dir, 'root');
    await addInstallFiles(root);
    const log = path.join(dir, 'systemctl.log');
    // Records every call; `disable --now agentd.service` is accepted here, the rest goes to the sim.
    await writeFile(
      path.join(dir, 'systemctl'),
      `#!/bin/sh\necho "$*" >> '${log}'\nif [ "$1" = disable ]; then exit 0; fi\nexec '${path.join(simBin, 'systemctl')}' "$@"\n`,
    );
    await chmod(path.join(dir, 'systemctl'), 0o755);
    const r = await uninstall(
      { root, pidFile: path.join(dir, 'agentd.pid'), pathFirst: dir },
      '--systemd',
      'yes',
    );
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as Report;
    expect(step(report, 'disable-unit')).toMatchObject({
      ok: true,
      skipped: false,
      detail: 'agentd.service disabled and stopped',
    });
    expect(step(report, 'daemon-reload')).toMatchObject({ ok: true, skipped: false });
    expect((await readFile(log, 'utf8')).trim().split('\n')).toEqual([
      'disable --now agentd.service',
      'daemon-reload',
    ]);
  });

  it('a unit that is not installed is nothing to disable', async () => {
    const dir = await makeTempDir();
    await writeFile(
      path.join(dir, 'systemctl'),
      `#!/bin/sh\nif [ "$1" = disable ]; then echo "Failed to disable unit: Unit file agentd.service does not exist." >&2; exit 1; fi\nexit 0\n`,
    );
    await chmod(path.join(dir, 'systemctl'), 0o755);
    const r = await uninstall(
      { root: path.join(dir, 'root'), pidFile: path.join(dir, 'agentd.pid'), pathFirst: dir },
      '--systemd',
      'yes',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(step(JSON.parse(r.stdout) as Report, 'disable-unit')).toMatchObject({
      ok: true,
      detail: 'agentd.service is not installed',
    });
  });
});
