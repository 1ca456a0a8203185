import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentError } from '../../../../src/errors.js';
import { createHostPaths } from '../../../../src/host/paths.js';
import type { CommandResult } from '../../../../src/host/types.js';
import { parseSimFaults } from '../../../../src/sim/faults.js';
import { createSimHost } from '../../../../src/sim/host/index.js';
import type { SimHost } from '../../../../src/sim/host/index.js';
import { createFakeClock } from '../../host/fake-clock.js';
import type { FakeClock } from '../../host/fake-clock.js';
import { makeTempRoot, prepareMachine } from './sim-fixtures.js';
import type { TempRoot } from './sim-fixtures.js';

const inM = (m: string, ...cmd: string[]): string[] => [`--machine=${m}`, '--pipe', '--wait', ...cmd];

async function rejection(p: Promise<unknown>): Promise<AgentError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AgentError);
    return err as AgentError;
  }
  throw new Error('expected the promise to reject');
}

let tmp: TempRoot;
let clock: FakeClock;
let host: SimHost;

beforeEach(async () => {
  tmp = await makeTempRoot();
  clock = createFakeClock();
  host = createSimHost({ root: tmp.root, clock });
});

afterEach(async () => {
  await tmp.cleanup();
});

/** Run a command without throwing on a non-zero exit. */
const sh = (file: string, ...args: string[]): Promise<CommandResult> =>
  host.run(file, args, { reject: false });

/**
 * `machinectl start`, then wait for the machine's bus the way the engine does: like real
 * systemd, the first `systemd-run --machine` after a start finds no bus yet.
 */
async function startBooted(m: 'kube1' | 'kube2'): Promise<void> {
  await host.run('machinectl', ['start', m]);
  const first = await sh('systemd-run', ...inM(m, '/bin/true'));
  expect(first).toMatchObject({ exitCode: 1, stderr: 'Failed to connect to bus: No such file or directory' });
  expect((await sh('systemd-run', ...inM(m, '/bin/true'))).exitCode).toBe(0);
}

async function bootWithServices(m: 'kube1' | 'kube2'): Promise<void> {
  await startBooted(m);
  await host.run('systemd-run', inM(m, 'systemctl', 'enable', '--now', 'containerd.service'));
  await host.run('systemd-run', inM(m, 'systemctl', 'enable', '--now', 'kubelet.service'));
}

describe('command lines', () => {
  it('rejects an unsupported line with COMMAND_FAILED, exit 1 and the sim stderr, even with reject:false', async () => {
    const err = await rejection(host.run('machinectl', ['reboot', 'kube1'], { reject: false }));
    expect(err.code).toBe('COMMAND_FAILED');
    expect(err.data).toMatchObject({
      exitCode: 1,
      stderr: 'sim: unsupported command: machinectl reboot kube1',
    });
  });

  it('throws COMMAND_FAILED for a non-zero exit unless reject:false', async () => {
    const err = await rejection(host.run('machinectl', ['show', 'kube1']));
    expect(err.code).toBe('COMMAND_FAILED');
    expect(err.data.exitCode).toBe(1);
    const res = await sh('machinectl', 'show', 'kube1');
    expect(res).toMatchObject({
      command: 'machinectl show kube1',
      exitCode: 1,
      stderr: "Could not get path to machine: No machine 'kube1' known",
    });
  });

  it('fails with CANCELLED when the signal is already aborted', async () => {
    const err = await rejection(host.run('systemctl', ['daemon-reload'], { signal: AbortSignal.abort() }));
    expect(err.code).toBe('CANCELLED');
  });
});

describe('machines', () => {
  it('does not start a machine without its rootfs directory', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await rm(createHostPaths(tmp.root).machineDir('kube1'), { recursive: true });
    const res = await sh('machinectl', 'start', 'kube1');
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toMatch(/does not exist/);
    expect((await host.snapshot()).machines.kube1.registration).toBe('none');
  });

  it('does not start a machine without its .nspawn file', async () => {
    await prepareMachine(tmp.root, 'kube1', { nspawn: false });
    const res = await sh('machinectl', 'start', 'kube1');
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toContain('kube1.nspawn');
  });

  it('starts a prepared machine, which then answers show and systemd-run', async () => {
    await prepareMachine(tmp.root, 'kube1');
    expect((await sh('systemd-run', ...inM('kube1', '/bin/true'))).exitCode).toBe(1);
    await startBooted('kube1');
    const show = await host.run('machinectl', ['show', 'kube1']);
    expect(show.stdout).toContain('Name=kube1');
    expect(show.stdout).toContain('State=running');
    expect((await host.run('systemd-run', inM('kube1', '/bin/true'))).exitCode).toBe(0);
    // Starting a running machine is a no-op, like starting an active unit.
    expect((await sh('machinectl', 'start', 'kube1')).exitCode).toBe(0);
    const snap = await host.snapshot();
    expect(snap.machines.kube1).toMatchObject({ registration: 'running', running: true, imageExists: true });
    expect(snap.machines.kube2.running).toBe(false);
  });

  it('enables and disables machines, and refuses both for a missing image as machinectl does', async () => {
    expect(await sh('machinectl', 'enable', 'kube2')).toMatchObject({
      exitCode: 1,
      stderr: "Machine image 'kube2' does not exist.",
    });
    await prepareMachine(tmp.root, 'kube2');
    await host.run('machinectl', ['enable', 'kube2']);
    expect((await host.snapshot()).machines.kube2.enabled).toBe(true);
    await host.run('machinectl', ['disable', 'kube2']);
    expect((await host.snapshot()).machines.kube2.enabled).toBe(false);
  });

  it("shows the machine's unit state as systemctl show does", async () => {
    const show = (m: string) =>
      sh(
        'systemctl',
        'show',
        '--property=ActiveState',
        '--property=SubState',
        '--property=Result',
        `systemd-nspawn@${m}.service`,
      );
    expect((await show('kube1')).stdout).toBe('ActiveState=inactive\nSubState=dead\nResult=success');
    await prepareMachine(tmp.root, 'kube1');
    await startBooted('kube1');
    expect((await show('kube1')).stdout).toBe('ActiveState=active\nSubState=running\nResult=success');
  });

  it('stops a machine through its nspawn unit, and stopping an inactive unit succeeds', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await bootWithServices('kube1');
    await host.run('systemctl', ['stop', 'systemd-nspawn@kube1.service']);
    expect((await sh('machinectl', 'show', 'kube1')).exitCode).toBe(1);
    const snap = await host.snapshot();
    expect(snap.machines.kube1.units['kubelet.service']).toMatchObject({ active: 'inactive', enabled: true });
    expect((await sh('systemctl', 'stop', 'systemd-nspawn@kube1.service')).exitCode).toBe(0);
  });

  it('terminates a registered machine and refuses an unknown one', async () => {
    const unknown = await sh('machinectl', 'terminate', 'kube1');
    expect(unknown).toMatchObject({
      exitCode: 1,
      stderr: "Could not terminate machine: No machine 'kube1' known",
    });
    await prepareMachine(tmp.root, 'kube1');
    await startBooted('kube1');
    await host.run('machinectl', ['terminate', 'kube1']);
    expect((await host.snapshot()).machines.kube1.registration).toBe('none');
  });

  it('removes an image (and its .nspawn file) only when the machine is not registered', async () => {
    const paths = createHostPaths(tmp.root);
    expect((await sh('machinectl', 'remove', 'kube1')).stderr).toMatch(/No image 'kube1' known/);
    await prepareMachine(tmp.root, 'kube1');
    await startBooted('kube1');
    const busy = await sh('machinectl', 'remove', 'kube1');
    expect(busy.exitCode).toBe(1);
    expect((await host.snapshot()).machines.kube1.imageExists).toBe(true);
    await host.run('machinectl', ['terminate', 'kube1']);
    await host.run('machinectl', ['remove', 'kube1']);
    const snap = await host.snapshot();
    expect(snap.machines.kube1).toMatchObject({ imageExists: false, nspawnFileExists: false });
    await expect(readFile(paths.nspawnFile('kube1'))).rejects.toThrow();
  });

  it('counts daemon-reloads', async () => {
    await host.run('systemctl', ['daemon-reload']);
    await host.run('systemctl', ['daemon-reload']);
    expect((await host.snapshot()).daemonReloads).toBe(2);
  });
});

describe('stale registrations', () => {
  it('refuses to start a stale machine with "already exists" until it is reset and terminated', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await startBooted('kube1');
    await host.crashMachine('kube1');
    let snap = await host.snapshot();
    expect(snap.machines.kube1).toMatchObject({ registration: 'stale', running: false, serviceFailed: true });
    expect((await host.run('machinectl', ['show', 'kube1'])).stdout).toContain('State=closing');
    expect((await sh('systemd-run', ...inM('kube1', '/bin/true'))).stderr).toMatch(/Host is down/);

    const start = await sh('machinectl', 'start', 'kube1');
    expect(start.exitCode).toBe(1);
    expect(start.stderr).toMatch(/already exists/);

    await host.run('systemctl', ['reset-failed', 'systemd-nspawn@kube1.service']);
    expect((await host.snapshot()).machines.kube1.serviceFailed).toBe(false);
    await host.run('machinectl', ['terminate', 'kube1']);
    expect((await sh('machinectl', 'show', 'kube1')).exitCode).toBe(1);
    await startBooted('kube1');
    snap = await host.snapshot();
    expect(snap.machines.kube1.running).toBe(true);
  });

  it('keeps a stale registration when the nspawn unit is stopped (only terminate clears it)', async () => {
    await prepareMachine(tmp.root, 'kube2');
    await host.crashMachine('kube2');
    await host.run('systemctl', ['stop', 'systemd-nspawn@kube2.service']);
    expect((await sh('machinectl', 'show', 'kube2')).exitCode).toBe(0);
  });
});

describe('units inside a machine', () => {
  it('reports inactive before anything started, and refuses commands while the machine is down', async () => {
    await prepareMachine(tmp.root, 'kube1');
    const down = await sh('systemd-run', ...inM('kube1', 'systemctl', 'is-active', 'kubelet.service'));
    expect(down.exitCode).toBe(1);
    // systemd 252 says the same for a machine that is not registered as for one that is gone.
    expect(down.stderr).toBe('Failed to connect to bus: Host is down');
    await startBooted('kube1');
    const res = await sh('systemd-run', ...inM('kube1', 'systemctl', 'is-active', 'kubelet.service'));
    expect(res).toMatchObject({ exitCode: 3, stdout: 'inactive' });
  });

  it('activates containerd and kubelet when the rootfs has matching binaries and drop-in', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await bootWithServices('kube1');
    const res = await host.run('systemd-run', inM('kube1', 'systemctl', 'is-active', 'kubelet.service'));
    expect(res).toMatchObject({ exitCode: 0, stdout: 'active' });
    const snap = await host.snapshot();
    expect(snap.machines.kube1.units).toEqual({
      'containerd.service': { enabled: true, active: 'active' },
      'kubelet.service': { enabled: true, active: 'active' },
    });
    expect(await host.kubeletHealthy('kube1')).toBe(true);
    expect(await host.kubeletHealthy('kube2')).toBe(false);
  });

  it('fails containerd without its binary', async () => {
    await prepareMachine(tmp.root, 'kube1', { containerd: false });
    await startBooted('kube1');
    const res = await sh(
      'systemd-run',
      ...inM('kube1', 'systemctl', 'enable', '--now', 'containerd.service'),
    );
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toMatch(/Job for containerd.service failed/);
    const unit = (await host.snapshot()).machines.kube1.units['containerd.service'];
    expect(unit).toMatchObject({ active: 'failed', enabled: true });
    expect(unit.reason).toMatch(/usr\/local\/bin\/containerd/);
  });

  it('fails kubelet without its binary', async () => {
    await prepareMachine(tmp.root, 'kube1', { kubeletVersion: null, declaredVersion: '1.34.0' });
    await startBooted('kube1');
    const res = await sh('systemd-run', ...inM('kube1', 'systemctl', 'enable', '--now', 'kubelet.service'));
    expect(res.exitCode).toBe(1);
    const isActive = await sh('systemd-run', ...inM('kube1', 'systemctl', 'is-active', 'kubelet.service'));
    expect(isActive).toMatchObject({ exitCode: 3, stdout: 'failed' });
  });

  it.each([
    [
      'a kubelet of another version',
      { kubeletVersion: '1.33.2', declaredVersion: '1.34.0' },
      /1\.33\.2.*1\.34\.0/,
    ],
    ['no drop-in', { declaredVersion: null }, /10-agentd\.conf is missing/],
  ])('keeps kubelet activating (crash-looping) with %s', async (_name, fixture, reason) => {
    await prepareMachine(tmp.root, 'kube1', fixture);
    await startBooted('kube1');
    // Type=simple: systemctl returns once the process is forked, so enable --now succeeds.
    await host.run('systemd-run', inM('kube1', 'systemctl', 'enable', '--now', 'kubelet.service'));
    const isActive = await sh('systemd-run', ...inM('kube1', 'systemctl', 'is-active', 'kubelet.service'));
    expect(isActive).toMatchObject({ exitCode: 3, stdout: 'activating' });
    expect((await host.snapshot()).machines.kube1.units['kubelet.service'].reason).toMatch(reason);
    expect(await host.kubeletHealthy('kube1')).toBe(false);
  });

  it('accepts a quoted drop-in line and a leading v in the declared version', async () => {
    const rootfs = await prepareMachine(tmp.root, 'kube1', { declaredVersion: null });
    const dropIn = path.join(rootfs, 'etc/systemd/system/kubelet.service.d/10-agentd.conf');
    await mkdir(path.dirname(dropIn), { recursive: true });
    await writeFile(dropIn, '[Service]\nEnvironment="AGENTD_KUBERNETES_VERSION=v1.34.0"\n');
    await bootWithServices('kube1');
    expect(await host.kubeletHealthy('kube1')).toBe(true);
  });

  it('stops units, and boots the units enabled in the rootfs when the machine starts again', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await bootWithServices('kube1');
    await host.run('systemd-run', inM('kube1', 'systemctl', 'stop', 'kubelet.service'));
    expect((await host.snapshot()).machines.kube1.units['kubelet.service'].active).toBe('inactive');
    await host.run('systemctl', ['stop', 'systemd-nspawn@kube1.service']);
    await startBooted('kube1');
    expect(await host.kubeletHealthy('kube1')).toBe(true);
  });

  it('forgets enabled units when the rootfs is replaced', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await bootWithServices('kube1');
    await host.run('machinectl', ['terminate', 'kube1']);
    await rm(createHostPaths(tmp.root).machineDir('kube1'), { recursive: true });
    await prepareMachine(tmp.root, 'kube1');
    await startBooted('kube1');
    const snap = await host.snapshot();
    expect(snap.machines.kube1.units['kubelet.service']).toEqual({ enabled: false, active: 'inactive' });
  });

  it('lets only one machine run kubelet (shared host network), and the other takes over once it stops', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await prepareMachine(tmp.root, 'kube2');
    await bootWithServices('kube1');
    await bootWithServices('kube2');
    let snap = await host.snapshot();
    expect(snap.machines.kube2.units['kubelet.service'].active).toBe('activating');
    expect(snap.machines.kube2.units['kubelet.service'].reason).toMatch(/kube1/);
    await host.run('systemctl', ['stop', 'systemd-nspawn@kube1.service']);
    // The next command gives the crash-looping kubelet its restart.
    const res = await host.run('systemd-run', inM('kube2', 'systemctl', 'is-active', 'kubelet.service'));
    expect(res.stdout).toBe('active');
    snap = await host.snapshot();
    expect(snap.machines.kube2.units['kubelet.service'].active).toBe('active');
  });
});

describe('health gate exec checks inside a machine', () => {
  it('runs true, false and test against the rootfs, and exits 127 for anything else', async () => {
    await prepareMachine(tmp.root, 'kube2');
    const down = await sh('systemd-run', ...inM('kube2', 'test', '-e', '/usr/local/bin/kubelet'));
    expect(down).toMatchObject({ exitCode: 1, stderr: 'Failed to connect to bus: Host is down' });
    await startBooted('kube2');
    const code = async (...cmd: string[]): Promise<number> =>
      (await sh('systemd-run', ...inM('kube2', ...cmd))).exitCode;
    expect(await code('true')).toBe(0);
    expect(await code('/usr/bin/false')).toBe(1);
    expect(await code('test', '-x', '/usr/local/bin/kubelet')).toBe(0);
    expect(await code('/usr/bin/test', '-d', '/usr/local/bin/kubelet')).toBe(1);
    expect(await code('test', '-f', '/etc/agentd-ready')).toBe(1);
    // A test makes the check pass through the machine's files.
    const rootfs = createHostPaths(tmp.root).machineDir('kube2');
    await writeFile(path.join(rootfs, 'etc/agentd-ready'), 'ok\n');
    expect(await code('test', '-f', '/etc/agentd-ready')).toBe(0);
    // The path stays inside the rootfs: ".." cannot climb out of it.
    expect(await code('test', '-d', `/../../../..${tmp.root}`)).toBe(1);
    const other = await sh('systemd-run', ...inM('kube2', 'curl', '-f', 'http://127.0.0.1:8080/'));
    expect(other.exitCode).toBe(127);
    expect(other.stderr).toMatch(/not simulated/);
  });
});

describe('persistence', () => {
  it('shares the model between hosts on one root through state.json', async () => {
    await prepareMachine(tmp.root, 'kube2');
    await startBooted('kube2');
    expect(host.stateFile).toBe(path.join(tmp.root, 'var/lib/agentd-sim/state.json'));
    const stored = JSON.parse(await readFile(host.stateFile, 'utf8')) as { machines: { kube2: unknown } };
    expect(stored.machines.kube2).toMatchObject({ registration: 'running' });
    const other = createSimHost({ root: tmp.root, clock });
    expect((await other.run('systemd-run', inM('kube2', '/bin/true'))).exitCode).toBe(0);
    await other.run('machinectl', ['terminate', 'kube2']);
    expect((await sh('machinectl', 'show', 'kube2')).exitCode).toBe(1);
  });

  it('serializes concurrent writers so no update is lost', async () => {
    const other = createSimHost({ root: tmp.root, clock });
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? host : other).run('systemctl', ['daemon-reload'])),
    );
    expect((await host.snapshot()).daemonReloads).toBe(20);
  });

  it('refuses a corrupt state file with PRECONDITION_FAILED', async () => {
    await mkdir(path.dirname(host.stateFile), { recursive: true });
    await writeFile(host.stateFile, '{"version": 7}');
    const err = await rejection(host.run('systemctl', ['daemon-reload']));
    expect(err.code).toBe('PRECONDITION_FAILED');
    expect(err.message).toContain(host.stateFile);
  });
});

describe('faults', () => {
  it('start-fails: the machine does not start and its unit is failed', async () => {
    host = createSimHost({ root: tmp.root, clock, faults: parseSimFaults('start-fails:kube1') });
    await prepareMachine(tmp.root, 'kube1');
    await prepareMachine(tmp.root, 'kube2');
    const res = await sh('machinectl', 'start', 'kube1');
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toMatch(/Job for systemd-nspawn@kube1.service failed/);
    expect((await host.snapshot()).machines.kube1).toMatchObject({
      registration: 'none',
      serviceFailed: true,
    });
    expect((await sh('machinectl', 'start', 'kube2')).exitCode).toBe(0);
  });

  it('kubelet-inactive: kubelet never becomes active', async () => {
    host = createSimHost({ root: tmp.root, clock, faults: parseSimFaults('kubelet-inactive:*') });
    await prepareMachine(tmp.root, 'kube2');
    await bootWithServices('kube2');
    for (let i = 0; i < 3; i++) {
      const res = await sh('systemd-run', ...inM('kube2', 'systemctl', 'is-active', 'kubelet.service'));
      expect(res.stdout).toBe('activating');
    }
    expect((await host.snapshot()).machines.kube2.units['containerd.service'].active).toBe('active');
  });

  it('latency: commands on that machine take that long on the injected clock', async () => {
    host = createSimHost({ root: tmp.root, clock, faults: parseSimFaults('latency=1500:kube1') });
    const before = clock.now();
    const res = await sh('machinectl', 'show', 'kube1');
    expect(res.durationMs).toBe(1500);
    await sh('machinectl', 'show', 'kube2');
    await host.run('systemctl', ['daemon-reload']);
    expect(clock.sleeps).toEqual([1500]);
    expect(clock.now() - before).toBe(1500);
  });

  it('latency beyond the timeout fails with TIMEOUT after the timeout', async () => {
    host = createSimHost({ root: tmp.root, clock, faults: parseSimFaults('latency=5000:*') });
    const err = await rejection(host.run('machinectl', ['show', 'kube2'], { timeoutMs: 1000 }));
    expect(err.code).toBe('TIMEOUT');
    expect(clock.sleeps).toEqual([1000]);
  });

  it('latency is cancellable', async () => {
    host = createSimHost({ root: tmp.root, clock, faults: parseSimFaults('latency=5000:kube1') });
    const controller = new AbortController();
    controller.abort();
    const err = await rejection(host.run('machinectl', ['show', 'kube1'], { signal: controller.signal }));
    expect(err.code).toBe('CANCELLED');
  });
});
