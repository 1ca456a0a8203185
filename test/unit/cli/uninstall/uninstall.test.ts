import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StopReport } from '../../../../src/cli/stop-daemon.js';
import { runUninstallSteps, type UninstallOptions } from '../../../../src/cli/uninstall/uninstall.js';
import type { MachineManager } from '../../../../src/host/machines.js';
import { createHostPaths } from '../../../../src/host/paths.js';
import type { CommandRunner, MachineName } from '../../../../src/host/types.js';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'agentctl-uninstall-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const FILES = [
  '/etc/systemd/nspawn/kube1.nspawn',
  '/etc/systemd/system/systemd-nspawn@kube1.service.d/override.conf',
  '/etc/unbounded/agent/kube1-applied-config.json',
  '/etc/unbounded/agent/kube1-applied-config.json.sha256',
  '/etc/agentd/config.yaml',
  '/var/lib/agentd/journal.json',
  '/var/lib/agentd/.agentd-state-dir',
  '/run/agentd/agentd.pid',
  '/etc/systemd/system/agentd.service',
  '/etc/systemd/system/multi-user.target.wants/agentd.service',
  '/var/lib/machines/kube1/etc/hostname',
];

/** What agentd writes into its marker and PID file; every other file holds `x`. */
const CONTENT: Record<string, string> = {
  '/var/lib/agentd/.agentd-state-dir': 'agentd state directory\n',
  '/run/agentd/agentd.pid': '42\n',
};

async function populate(): Promise<void> {
  for (const f of FILES) {
    await mkdir(path.dirname(path.join(root, f)), { recursive: true });
    await writeFile(path.join(root, f), CONTENT[f] ?? 'x');
  }
}

const at = (f: string): string => path.join(root, f);

function fakes(
  o: { failRemove?: MachineName; stopThrows?: boolean; stop?: Partial<StopReport>; lockHeld?: boolean } = {},
) {
  const log: string[] = [];
  const runner: CommandRunner = {
    async run(file, args) {
      log.push(`${file} ${args.join(' ')}`);
      return { command: `${file} ${args.join(' ')}`, exitCode: 0, stdout: '', stderr: '', durationMs: 1 };
    },
  };
  const machines = {
    async inspect(m: MachineName) {
      log.push(`inspect ${m}`);
      return { name: m, registered: m === 'kube1', running: m === 'kube1', kubelet: 'active' as const };
    },
    async stop(m: MachineName) {
      log.push(`stop ${m}`);
    },
    async remove(m: MachineName) {
      log.push(`remove ${m}`);
      if (o.failRemove === m) throw new Error(`remove machine ${m}: still registered`);
      await rm(at(`/var/lib/machines/${m}`), { recursive: true, force: true });
    },
  } as unknown as MachineManager;
  const stopDaemon = async (pidFile: string): Promise<StopReport> => {
    log.push('stop-daemon');
    if (o.stopThrows) throw new Error('kill EPERM');
    return { pidFilePresent: true, pidFile, pid: 42, signalled: true, forceKilled: false, ...o.stop };
  };
  const claimInstance = async () => {
    log.push('claim-lock');
    if (o.lockHeld)
      throw new Error('an agentd still runs: pid 7 holds the instance lock of --state-dir /var/lib/agentd');
    return {
      async release() {
        log.push('release-lock');
      },
    };
  };
  return { log, runner, machines, stopDaemon, claimInstance };
}

function options(f: ReturnType<typeof fakes>, o: Partial<UninstallOptions> = {}): UninstallOptions {
  const paths = createHostPaths(root);
  return {
    paths,
    stateDir: paths.resolve('/var/lib/agentd'),
    pidFile: paths.resolve('/run/agentd/agentd.pid'),
    socket: paths.resolve('/run/agentd/agentd.sock'),
    graceMs: 5000,
    keepConfig: false,
    systemd: { runs: false, why: 'systemd is not running here: skipped' },
    runner: f.runner,
    machines: f.machines,
    stopDaemon: f.stopDaemon,
    claimInstance: f.claimInstance,
    ...o,
  };
}

describe('runUninstallSteps', () => {
  it('with systemd: disable first, daemon-reload last, everything removed, each step reported', async () => {
    await populate();
    for (const file of ['/usr/local/bin/unbounded-agent', '/usr/local/bin/other-tool']) {
      await mkdir(path.dirname(at(file)), { recursive: true });
      await writeFile(at(file), '#!/bin/sh\n');
    }
    const f = fakes();
    const seen: string[] = [];
    const report = await runUninstallSteps(
      options(f, { systemd: { runs: true }, onStep: (s) => seen.push(s.step) }),
    );
    expect(report.ok).toBe(true);
    expect(report.steps.map((s) => s.step)).toEqual([
      'disable-unit',
      'stop-daemon',
      'remove-machine-kube1',
      'remove-machine-kube2',
      'remove-nspawn-files',
      'remove-configs',
      'remove-upstream-agent',
      'remove-state',
      'remove-runtime',
      'remove-unit',
      'daemon-reload',
    ]);
    expect(seen).toEqual(report.steps.map((s) => s.step));
    // The instance lock is taken once the daemon is stopped and held until the last step.
    expect(f.log).toEqual([
      'systemctl disable --now agentd.service',
      'stop-daemon',
      'claim-lock',
      'inspect kube1',
      'stop kube1',
      'remove kube1',
      'inspect kube2',
      // remove-upstream-agent: what the upstream agent left on the host's network.
      'ip -o link show',
      'ip rule show',
      'ip route show table all',
      'systemctl daemon-reload',
      'release-lock',
    ]);
    for (const file of FILES) expect(existsSync(at(file)), file).toBe(false);
    // The upstream agent's binary goes too (nothing else of /usr/local/bin).
    expect(existsSync(at('/usr/local/bin/unbounded-agent'))).toBe(false);
    expect(existsSync(at('/usr/local/bin/other-tool'))).toBe(true);
    expect(report.steps.find((s) => s.step === 'remove-upstream-agent')).toMatchObject({
      ok: true,
      detail: 'removed /usr/local/bin/unbounded-agent',
    });
    expect(existsSync(at('/etc/unbounded/agent'))).toBe(false);
    expect(report.steps.find((s) => s.step === 'remove-machine-kube2')).toMatchObject({
      ok: true,
      detail: 'kube2 is absent',
    });
    expect(report.steps.find((s) => s.step === 'stop-daemon')?.data).toMatchObject({
      pid: 42,
      forceKilled: false,
    });
  });

  it('without systemd: the systemctl steps are skipped and say why, in the words given', async () => {
    const f = fakes();
    const why = 'the simulated host (--host sim) has no systemd unit of agentd: skipped';
    const report = await runUninstallSteps(options(f, { systemd: { runs: false, why } }));
    expect(report.ok).toBe(true);
    for (const step of ['disable-unit', 'daemon-reload']) {
      expect(report.steps.find((s) => s.step === step)).toMatchObject({
        ok: true,
        skipped: true,
        detail: why,
      });
    }
    expect(f.log.filter((l) => l.startsWith('systemctl'))).toEqual([]);
  });

  it('reports a force kill', async () => {
    const f = fakes({ stop: { forceKilled: true } });
    const report = await runUninstallSteps(options(f));
    expect(report.steps.find((s) => s.step === 'stop-daemon')?.detail).toContain('force-killed (SIGKILL)');
  });

  it('a machine that cannot be removed: files are kept and the steps say so; a rerun finishes', async () => {
    await populate();
    const failing = await runUninstallSteps(options(fakes({ failRemove: 'kube1' })));
    expect(failing.ok).toBe(false);
    expect(failing.steps.find((s) => s.step === 'remove-machine-kube1')).toMatchObject({
      ok: false,
      skipped: false,
    });
    expect(failing.steps.find((s) => s.step === 'remove-machine-kube1')?.detail).toContain(
      'still registered',
    );
    for (const step of [
      'remove-nspawn-files',
      'remove-configs',
      'remove-upstream-agent',
      'remove-state',
      'remove-runtime',
      'remove-unit',
    ]) {
      const s = failing.steps.find((x) => x.step === step);
      expect(s).toMatchObject({ ok: false, skipped: true });
      expect(s?.detail).toContain('run again');
    }
    expect(existsSync(at('/etc/unbounded/agent/kube1-applied-config.json'))).toBe(true);
    expect(existsSync(at('/etc/systemd/system/agentd.service'))).toBe(true);

    const rerun = await runUninstallSteps(options(fakes()));
    expect(rerun.ok).toBe(true);
    for (const file of FILES) expect(existsSync(at(file)), file).toBe(false);
  });

  it('a daemon that cannot be stopped: nothing else is touched', async () => {
    await populate();
    const f = fakes({ stopThrows: true });
    const report = await runUninstallSteps(options(f));
    expect(report.ok).toBe(false);
    expect(report.steps.find((s) => s.step === 'stop-daemon')).toMatchObject({
      ok: false,
      detail: 'kill EPERM',
    });
    expect(report.steps.find((s) => s.step === 'remove-machine-kube1')).toMatchObject({ skipped: true });
    expect(f.log).toEqual(['stop-daemon']);
    for (const file of FILES) expect(existsSync(at(file)), file).toBe(true);
  });

  it('an agentd that still holds the instance lock after the stop: the step fails, nothing else is touched', async () => {
    await populate();
    const f = fakes({ lockHeld: true });
    const report = await runUninstallSteps(options(f));
    expect(report.ok).toBe(false);
    expect(report.steps.find((s) => s.step === 'stop-daemon')).toMatchObject({
      ok: false,
      detail:
        'agentd (pid 42) stopped (SIGTERM); but an agentd still runs: pid 7 holds the instance lock of --state-dir /var/lib/agentd',
    });
    for (const m of ['kube1', 'kube2'])
      expect(report.steps.find((s) => s.step === `remove-machine-${m}`)).toMatchObject({ skipped: true });
    expect(f.log).toEqual(['stop-daemon', 'claim-lock']);
    for (const file of FILES) expect(existsSync(at(file)), file).toBe(true);
  });

  it('--keep-config keeps the applied configs and /etc/agentd', async () => {
    await populate();
    const report = await runUninstallSteps(options(fakes(), { keepConfig: true }));
    expect(report.steps.find((s) => s.step === 'remove-configs')).toMatchObject({ ok: true, skipped: true });
    expect(existsSync(at('/etc/unbounded/agent/kube1-applied-config.json'))).toBe(true);
    expect(existsSync(at('/etc/agentd/config.yaml'))).toBe(true);
    expect(existsSync(at('/var/lib/agentd'))).toBe(false);
  });

  it("refuses a state dir without agentd's marker, naming it, and leaves it as it is", async () => {
    await populate();
    await rm(at('/var/lib/agentd/.agentd-state-dir'));
    const report = await runUninstallSteps(options(fakes()));
    expect(report.ok).toBe(false);
    const state = report.steps.find((s) => s.step === 'remove-state');
    expect(state).toMatchObject({ ok: false, skipped: false });
    expect(state?.detail).toBe(
      `refusing to remove ${at('/var/lib/agentd')}: it does not carry agentd's marker .agentd-state-dir, so it is not known to be agentd's state directory; remove it yourself if it is`,
    );
    expect(existsSync(at('/var/lib/agentd/journal.json'))).toBe(true);
    // A marker by that name that is not agentd's counts for nothing either.
    await writeFile(at('/var/lib/agentd/.agentd-state-dir'), 'my notes\n');
    expect((await runUninstallSteps(options(fakes()))).ok).toBe(false);
    expect(existsSync(at('/var/lib/agentd/journal.json'))).toBe(true);
  });

  it('removes the --pid-file path only when it holds a PID', async () => {
    await populate();
    await writeFile(at('/run/agentd/agentd.pid'), 'precious\n');
    const pidFile = at('notes.txt');
    await writeFile(pidFile, 'precious\n');
    const report = await runUninstallSteps(options(fakes(), { pidFile }));
    expect(report.ok).toBe(true);
    expect(await readFile(pidFile, 'utf8')).toBe('precious\n');
  });

  it('never removes the root, and removes a --socket path only if it is a socket', async () => {
    await writeFile(at('not-a-socket'), 'keep me');
    const report = await runUninstallSteps(options(fakes(), { stateDir: root, socket: at('not-a-socket') }));
    expect(report.steps.find((s) => s.step === 'remove-state')).toMatchObject({ ok: false });
    expect(report.steps.find((s) => s.step === 'remove-state')?.detail).toContain('refusing to remove');
    expect(existsSync(root)).toBe(true);
    expect(existsSync(at('not-a-socket'))).toBe(true);
  });
});
