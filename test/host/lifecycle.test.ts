/**
 * agentd keeps systemd's watchdog fed, and its socket group lets a member of it, not root, use
 * agentctl. Its own lifecycle on real systemd never touches kubelet's machine: restarting and
 * stopping agentd.service, or install.sh upgrading it (which restarts agentd), leave the running
 * machine (and its kubelet) as they were. install.sh keeps the operator's choices as real systemd
 * has them: a `systemctl disable` stays (a running agentd is restarted only on an upgrade), and a
 * mask (the unit linked to /dev/null, or `systemctl mask --runtime`) stays, agentd neither
 * restarted nor started; once unmasked, a rerun installs the unit and starts agentd. `agentctl
 * stop` and `agentctl uninstall`, given a PID file that does not name the running agentd
 * (garbage, another live process's PID), refuse with PID_FILE_MISMATCH and change nothing. Then
 * the node is torn down the three ways an operator can: `agentctl reset`, `agentctl stop`, and
 * `agentctl uninstall` (unit disabled and gone, machines gone, files gone; a rerun is harmless).
 * Last, the tarball's own way: installed again with its `install.sh` (masked at runtime first,
 * which it keeps to until unmasked), joined, and removed with `install.sh --uninstall`, a rerun
 * of which (no daemon left to ask) is harmless too.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expectNoMachines,
  expectNode,
  runningMachines,
  unitMainPid,
  unitState,
  type OperationJson,
} from '../support/real-host/assert-node.js';
import { REAL_NODE_CONFIG, startJoinedNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

describe.skipIf(!requireRealHost())('agentd lifecycle on a real systemd host', { timeout: 180_000 }, () => {
  let node: RealNode;

  const join = async (): Promise<void> => {
    const op = await node.agentctlJson<OperationJson>([
      'update',
      '--config',
      await node.configFile(node.agentConfig()),
    ]);
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
  };

  /** The tarball the suite installed from, unpacked in /root (test/support/real-host/install.ts). */
  const releaseDir = async (): Promise<string> =>
    (await node.host.execOk(['sh', '-c', 'ls -d /root/agentd-*-linux-x64'])).stdout.trim();

  beforeAll(async () => {
    node = await startJoinedNode({ label: 'lifecycle' });
  }, 600_000);

  afterAll(async () => {
    await node?.stop();
  }, 120_000);

  it('watching the node leaves no line in the machine’s journal', { timeout: 120_000 }, async () => {
    // Repair checks the node every 30 s, and status reads it at every change. With `systemd-run`
    // each check made two transient units in the machine, four journal lines every 30 s
    // (docs/operations.md, "Repair"); asked over the machine's bus, it makes none.
    // Where the machine's journal ends now: what the join wrote is before it.
    const tail = await node.host.execOk(['journalctl', '--machine=kube1', '-n', '0', '--show-cursor', '-q']);
    const cursor = /-- cursor: (.+)/.exec(tail.stdout)?.[1]?.trim();
    expect(cursor, tail.stdout).toBeTruthy();
    await node.agentctlJson(['status']);
    await new Promise((r) => setTimeout(r, 35_000));
    const journal = await node.host.execOk([
      'journalctl',
      '--machine=kube1',
      '--no-pager',
      '-q',
      `--after-cursor=${cursor}`,
    ]);
    expect(journal.stdout).not.toMatch(/run-u\d+\.service/);
  });

  it('pings systemd’s watchdog (WatchdogSec=2min) every minute: systemd never restarts it', async () => {
    const show = async (): Promise<Record<string, number>> => {
      const props = ['ExecMainStartTimestampMonotonic', 'WatchdogTimestampMonotonic', 'NRestarts', 'MainPID'];
      const out = await node.host.execOk([
        'systemctl',
        'show',
        'agentd.service',
        ...props.map((p) => `-p${p}`),
      ]);
      return Object.fromEntries(
        out.stdout
          .trim()
          .split('\n')
          .map((l) => l.split('=', 2))
          .map(([k, v]) => [k, Number(v)]),
      );
    };
    const start = await show();
    // systemd stamps the watchdog at READY=1 and at every WATCHDOG=1 after it; agentd sends one at
    // half the interval. Wait for a stamp a minute after the start: a ping, not the readiness.
    let now = start;
    const deadline = Date.now() + 90_000;
    while (now.WatchdogTimestampMonotonic! < start.ExecMainStartTimestampMonotonic! + 50_000_000) {
      expect(Date.now(), `no watchdog ping: ${JSON.stringify(now)}`).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 1000));
      now = await show();
    }
    expect(now.MainPID).toBe(start.MainPID);
    expect(now.NRestarts).toBe(0);
  });

  it('restarting agentd.service leaves kube1 and its kubelet running', async () => {
    const pid = await unitMainPid(node, 'systemd-nspawn@kube1.service');
    await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
    await node.waitReady();
    expect(await unitMainPid(node, 'systemd-nspawn@kube1.service')).toBe(pid);
    await expectNode(node, { active: 'kube1', version: '1.34.0' });
  });

  it('stopping agentd.service leaves kube1 running; starting it again finds the node as it was', async () => {
    const pid = await unitMainPid(node, 'systemd-nspawn@kube1.service');
    await node.host.execOk(['systemctl', 'stop', 'agentd.service']);
    expect(await unitState(node, 'agentd.service')).toBe('inactive');
    expect(await runningMachines(node)).toEqual(['kube1']);
    expect(await unitMainPid(node, 'systemd-nspawn@kube1.service')).toBe(pid);
    // The socket and PID file went with the daemon.
    expect((await node.host.exec(['test', '-e', '/run/agentd/agentd.sock'])).exitCode).not.toBe(0);
    // Type=notify: `systemctl start` returns once recovery is done and the API serves.
    await node.host.execOk(['systemctl', 'start', 'agentd.service']);
    const status = await node.agentctlJson<{ daemon: { state: string } }>(['status']);
    expect(status.daemon.state).toBe('ready');
    const shown = await node.host.execOk([
      'systemctl',
      'show',
      '-p',
      'StatusText',
      '--value',
      'agentd.service',
    ]);
    expect(shown.stdout.trim()).toBe('serving on /run/agentd/agentd.sock');
    await expectNode(node, { active: 'kube1', version: '1.34.0' });
  });

  it('with socketGroup, a member of that group uses agentctl without root; another user is told why not', async () => {
    await node.host.execOk(['groupadd', '--system', 'agentd']);
    await node.host.execOk(['useradd', '--create-home', '--groups', 'agentd', 'alice']);
    await node.host.execOk(['useradd', '--create-home', 'bob']);
    await node.host.execOk(['sh', '-c', 'echo "socketGroup: agentd" >> /etc/agentd/config.yaml']);
    await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
    const mode = await node.host.execOk(['stat', '-c', '%a %U %G', '/run/agentd/agentd.sock']);
    expect(mode.stdout.trim()).toBe('660 root agentd');
    const alice = await node.host.exec(['runuser', '-u', 'alice', '--', 'agentctl', '--json', 'status']);
    expect(alice.exitCode, alice.stderr).toBe(0);
    expect(JSON.parse(alice.stdout)).toMatchObject({ node: { activeMachine: 'kube1' } });
    const bob = await node.host.exec(['runuser', '-u', 'bob', '--', 'agentctl', 'status']);
    expect(bob.exitCode).toBe(3);
    expect(bob.stderr).toContain('permission denied: add your user to the socket');
  });

  it('install.sh rerun changes nothing; with a changed release it restarts agentd, never kubelet', async () => {
    const dir = await releaseDir();
    const agentd = await unitMainPid(node, 'agentd.service');
    const machine = await unitMainPid(node, 'systemd-nspawn@kube1.service');
    const same = await node.host.execOk([`${dir}/install.sh`]);
    expect(same.stdout).not.toContain('installed /');
    expect(await unitMainPid(node, 'agentd.service')).toBe(agentd);

    // The next release, as far as install.sh can tell: its unit differs.
    await node.host.execOk(['sh', '-c', `echo '# the next release' >> ${dir}/systemd/agentd.service`]);
    const upgrade = await node.host.execOk([`${dir}/install.sh`], { timeoutMs: 120_000 });
    expect(upgrade.stdout).toContain('installed /etc/systemd/system/agentd.service');
    expect(upgrade.stdout).toContain('agentd restarted');
    expect(await unitMainPid(node, 'agentd.service')).not.toBe(agentd);
    expect(await unitMainPid(node, 'systemd-nspawn@kube1.service')).toBe(machine);
    await node.waitReady();
    await expectNode(node, { active: 'kube1', version: '1.34.0' });
  });

  it(
    "install.sh keeps the operator's disable and mask: it neither enables, starts nor restarts against them",
    {
      timeout: 420_000,
    },
    async () => {
      const dir = await releaseDir();
      const install = async (): Promise<string> =>
        (await node.host.execOk([`${dir}/install.sh`], { timeoutMs: 120_000 })).stdout;
      /** The next release, as far as install.sh can tell: its unit differs. */
      const nextRelease = (line: string) =>
        node.host.execOk(['sh', '-c', `echo '# ${line}' >> ${dir}/systemd/agentd.service`]);
      const systemctl = (...args: string[]) => node.host.execOk(['systemctl', ...args]);
      const enableState = async (): Promise<string> =>
        (await node.host.exec(['systemctl', 'is-enabled', 'agentd.service'])).stdout.trim();
      const machine = await unitMainPid(node, 'systemd-nspawn@kube1.service');

      // Disabled, still running: a rerun restarts nothing, an upgrade restarts agentd on it, and
      // both leave it disabled.
      await systemctl('disable', 'agentd.service');
      expect(await enableState()).toBe('disabled');
      let agentd = await unitMainPid(node, 'agentd.service');
      const rerun = await install();
      expect(rerun).not.toContain('installed /');
      expect(rerun).toContain('agentd.service stays disabled, as it was');
      expect(await enableState()).toBe('disabled');
      expect(await unitMainPid(node, 'agentd.service')).toBe(agentd);
      await nextRelease('a release after a disable');
      const upgrade = await install();
      expect(upgrade).toContain('installed /etc/systemd/system/agentd.service');
      expect(upgrade).toContain('agentd restarted; agentd.service stays disabled, as it was');
      expect(await enableState()).toBe('disabled');
      expect(await unitMainPid(node, 'agentd.service')).not.toBe(agentd);
      await node.waitReady();
      // Disabled and stopped: it stays stopped.
      await systemctl('stop', 'agentd.service');
      expect(await install()).toContain('agentd.service stays disabled and stopped, as it was');
      expect(await enableState()).toBe('disabled');
      expect(await unitState(node, 'agentd.service')).toBe('inactive');

      // Masked (a unit linked to /dev/null), running: neither a rerun nor an upgrade restarts it
      // or replaces the link; stopped, it is not started. `systemctl mask` itself refuses while
      // the unit is a file in /etc/systemd/system (docs/operations.md), so the operator links it.
      await systemctl('enable', '--now', 'agentd.service');
      await node.waitReady();
      const unit = '/etc/systemd/system/agentd.service';
      expect((await node.host.exec(['systemctl', 'mask', 'agentd.service'])).exitCode).not.toBe(0);
      await node.host.execOk(['ln', '-sf', '/dev/null', unit]);
      await systemctl('daemon-reload');
      expect(await enableState()).toBe('masked');
      agentd = await unitMainPid(node, 'agentd.service');
      await nextRelease('a release while masked');
      const masked = await install();
      expect(masked).toContain(`left ${unit} -> /dev/null as it is: agentd.service is masked`);
      expect(masked).toContain('so it was not enabled, started or restarted (systemctl unmask agentd');
      expect(masked).not.toContain(`installed ${unit}`);
      expect((await node.host.execOk(['readlink', unit])).stdout.trim()).toBe('/dev/null');
      expect(await unitMainPid(node, 'agentd.service')).toBe(agentd);
      await systemctl('stop', 'agentd.service');
      expect(await install()).toContain('agentd.service is masked');
      expect(await unitState(node, 'agentd.service')).toBe('inactive');
      expect(await enableState()).toBe('masked');

      // Unmasked: systemd's unmask removes every link to the unit's path, the enable link too, so
      // a rerun installs the unit and leaves agentd disabled and stopped; enabled, it runs again.
      await systemctl('unmask', 'agentd.service');
      const wants = '/etc/systemd/system/multi-user.target.wants/agentd.service';
      expect((await node.host.exec(['test', '-L', wants])).exitCode).not.toBe(0);
      const unmasked = await install();
      expect(unmasked).toContain(`installed ${unit}`);
      expect(unmasked).toContain('agentd.service stays disabled and stopped, as it was');
      await systemctl('enable', '--now', 'agentd.service');
      expect(await enableState()).toBe('enabled');

      // Masked at runtime once the unit is in /etc/systemd/system: systemd ignores that mask (the
      // file there overrides the link in /run), install.sh keeps to it: an upgrade neither
      // updates the unit nor restarts agentd. (A runtime mask before the first install: below.)
      await node.waitReady();
      await systemctl('mask', '--runtime', 'agentd.service');
      expect(await enableState()).toBe('enabled');
      agentd = await unitMainPid(node, 'agentd.service');
      await nextRelease('a release while masked at runtime');
      const runtime = await install();
      expect(runtime).toContain(
        'left /run/systemd/system/agentd.service -> /dev/null as it is: agentd.service is masked at runtime',
      );
      expect(runtime).toContain(
        'so it was not enabled, started or restarted (systemctl unmask --runtime agentd',
      );
      expect(runtime).not.toContain(`installed ${unit}`);
      expect(await unitMainPid(node, 'agentd.service')).toBe(agentd);
      await systemctl('unmask', '--runtime', 'agentd.service');
      const after = await install();
      expect(after).toContain(`installed ${unit}`);
      expect(after).toContain('agentd restarted');
      expect(await unitMainPid(node, 'agentd.service')).not.toBe(agentd);
      await node.waitReady();
      expect(await unitMainPid(node, 'systemd-nspawn@kube1.service')).toBe(machine);
      await expectNode(node, { active: 'kube1', version: '1.34.0' });
    },
  );

  it('agentctl stop and uninstall refuse a PID file that does not name the running agentd, and change nothing', async () => {
    const agentd = await unitMainPid(node, 'agentd.service');
    const garbage = (await node.host.execOk(['mktemp'])).stdout.trim();
    // A live process that is not agentd, in a unit of its own so that it is stopped by name.
    const sleeper = 'agentd-test-sleeper';
    await node.host.execOk(['systemd-run', `--unit=${sleeper}`, 'sleep', '600']);
    const foreign = (await node.host.execOk(['mktemp'])).stdout.trim();
    try {
      await node.host.execOk(['sh', '-c', `echo garbage > ${garbage}`]);
      const sleeperPid = await unitMainPid(node, `${sleeper}.service`);
      await node.host.execOk(['sh', '-c', `echo ${sleeperPid} > ${foreign}`]);

      const stop = await node.host.exec([
        'agentctl',
        '--json',
        '--socket',
        '/run/agentd/agentd.sock',
        'stop',
        '--pid-file',
        garbage,
      ]);
      expect(stop.exitCode, `${stop.stdout}${stop.stderr}`).toBe(1);
      expect(JSON.parse(stop.stdout)).toMatchObject({
        error: { code: 'PID_FILE_MISMATCH', pidFile: garbage, found: 'garbage', pid: Number(agentd) },
      });
      expect(await unitMainPid(node, 'agentd.service')).toBe(agentd);

      for (const [pidFile, found] of [
        [garbage, 'garbage'],
        [foreign, 'foreign'],
      ] as const) {
        const res = await node.host.exec(['agentctl', '--json', 'uninstall', '--yes', '--pid-file', pidFile]);
        expect(res.exitCode, `${res.stdout}${res.stderr}`).toBe(1);
        expect(JSON.parse(res.stdout)).toMatchObject({
          error: { code: 'PID_FILE_MISMATCH', pidFile, found, pid: Number(agentd) },
        });
        expect(res.stderr).toContain('nothing was changed');
      }
      // Nothing changed: agentd enabled and running as before, the machine and the files in place.
      expect(await unitMainPid(node, 'agentd.service')).toBe(agentd);
      expect((await node.host.exec(['systemctl', 'is-enabled', 'agentd.service'])).stdout.trim()).toBe(
        'enabled',
      );
      expect(await unitState(node, 'agentd.service')).toBe('active');
      expect(await runningMachines(node)).toEqual(['kube1']);
      for (const p of ['/var/lib/agentd', '/etc/systemd/system/agentd.service', '/etc/agentd/config.yaml']) {
        expect((await node.host.exec(['test', '-e', p])).exitCode, `${p} is gone`).toBe(0);
      }
      expect(await unitMainPid(node, `${sleeper}.service`)).toBe(sleeperPid);
      await expectNode(node, { active: 'kube1', version: '1.34.0' });
    } finally {
      await node.host.exec(['systemctl', 'stop', `${sleeper}.service`]);
      await node.host.exec(['rm', '-f', garbage, foreign]);
    }
  });

  it('agentctl reset removes both machines and their files', async () => {
    const op = await node.agentctlJson<OperationJson>(['reset', '--yes']);
    expect(op.state).toBe('succeeded');
    await expectNoMachines(node);
    const status = await node.agentctlJson<{ node: { activeMachine: string | null } }>(['status']);
    expect(status.node.activeMachine).toBeNull();
  });

  it('agentctl stop stops the daemon through its PID file without SIGKILL', async () => {
    await join();
    const res = await node.host.execOk(['agentctl', '--json', 'stop']);
    const report = JSON.parse(res.stdout) as Record<string, unknown>;
    expect(report).toMatchObject({ pidFilePresent: true, signalled: true, forceKilled: false });
    expect(await runningMachines(node)).toEqual(['kube1']);
    // Restart=always: systemd brings the daemon back; the node is untouched.
    await node.waitReady();
    await expectNode(node, { active: 'kube1', version: '1.34.0' });
  });

  it('agentctl uninstall removes the unit, the machines and the files, and a rerun is harmless', async () => {
    const res = await node.host.exec(['agentctl', '--json', 'uninstall', '--yes']);
    expect(res.exitCode, `${res.stdout}${res.stderr}`).toBe(0);
    expect(await unitState(node, 'agentd.service')).not.toBe('active');
    expect((await node.host.exec(['systemctl', 'is-enabled', 'agentd.service'])).stdout.trim()).not.toBe(
      'enabled',
    );
    await expectNoMachines(node);
    for (const p of [
      '/etc/systemd/system/agentd.service',
      '/var/lib/agentd',
      '/etc/unbounded/agent',
      '/run/agentd/agentd.sock',
    ]) {
      expect((await node.host.exec(['test', '-e', p])).exitCode, `${p} is still there`).not.toBe(0);
    }
    // No daemon answers any more: the rerun names the host it tears down.
    const again = await node.host.exec(['agentctl', '--json', 'uninstall', '--yes', '--host', 'systemd']);
    expect(again.exitCode, `${again.stdout}${again.stderr}`).toBe(0);
  });

  it('install.sh installs again; install.sh --uninstall removes it all, and a rerun is harmless', async () => {
    const dir = await releaseDir();
    // The daemon config, as an operator would have kept it (the uninstall above removed it).
    await mkdir(node.host.outside('/etc/agentd'), { recursive: true });
    await writeFile(node.host.outside('/etc/agentd/config.yaml'), REAL_NODE_CONFIG);
    // Masked at runtime first: systemd honours that mask while no unit file is in
    // /etc/systemd/system, so install.sh installs none there, and neither enables nor starts
    // agentd; unmasked, a rerun finishes the first install.
    await node.host.execOk(['systemctl', 'mask', '--runtime', 'agentd.service']);
    const masked = await node.host.execOk([`${dir}/install.sh`], { timeoutMs: 120_000 });
    expect(masked.stdout).toContain(
      'left /run/systemd/system/agentd.service -> /dev/null as it is: agentd.service is masked at runtime',
    );
    expect((await node.host.exec(['systemctl', 'is-enabled', 'agentd.service'])).stdout.trim()).toBe(
      'masked-runtime',
    );
    expect(await unitState(node, 'agentd.service')).not.toBe('active');
    expect((await node.host.exec(['test', '-e', '/etc/systemd/system/agentd.service'])).exitCode).not.toBe(0);
    await node.host.execOk(['systemctl', 'unmask', '--runtime', 'agentd.service']);
    const unmasked = await node.host.execOk([`${dir}/install.sh`], { timeoutMs: 120_000 });
    expect(unmasked.stdout).toContain('installed, enabled and running');
    await node.waitReady();
    await join();

    const installed = [
      '/usr/local/bin/agentd',
      '/usr/local/bin/agentctl',
      '/usr/local/share/man/man8/agentd.8',
      '/usr/local/share/man/man8/agentctl.8',
      '/etc/systemd/system/agentd.service',
    ];
    const res = await node.host.exec([`${dir}/install.sh`, '--uninstall', '--yes']);
    expect(res.exitCode, `${res.stdout}${res.stderr}`).toBe(0);
    expect(await unitState(node, 'agentd.service')).not.toBe('active');
    await expectNoMachines(node);
    for (const p of [...installed, '/var/lib/agentd', '/etc/agentd']) {
      expect((await node.host.exec(['test', '-e', p])).exitCode, `${p} is still there`).not.toBe(0);
    }
    // Nothing answers on the socket now, and agentctl comes from the tarball: install.sh names
    // the host it installed agentd on, so the rerun needs no --host of the operator's.
    const again = await node.host.exec([`${dir}/install.sh`, '--uninstall', '--yes']);
    expect(again.exitCode, `${again.stdout}${again.stderr}`).toBe(0);
  });
});
