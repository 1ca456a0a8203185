/**
 * The execa runner and the machine manager driven through the real sim executables
 * (`machinectl`, `systemctl`, `systemd-run` first on PATH), on a temp root. Needs `npm run build`.
 */
import { access, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentError } from '../../src/errors.js';
import { createExecaRunner } from '../../src/host/execa-runner.js';
import { createMachineManager } from '../../src/host/machines.js';
import { createHostPaths } from '../../src/host/paths.js';
import { installSimBinaries, simBinDistDir } from '../../src/sim/bin/install.js';
import { createSimHost } from '../../src/sim/host/index.js';
import { createFakeClock } from '../unit/host/fake-clock.js';
import { makeTempRoot, prepareMachine } from '../unit/sim/host/sim-fixtures.js';
import type { TempRoot } from '../unit/sim/host/sim-fixtures.js';

let tmp: TempRoot;
let binDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  await access(path.join(simBinDistDir(), 'machinectl.js')).catch(() => {
    throw new Error(
      `${simBinDistDir()} has no compiled sim executables: run \`npm run build\` before this test`,
    );
  });
  tmp = await makeTempRoot('agentd-sim-bin-');
  binDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-sim-path-'));
  await installSimBinaries(binDir);
  env = {
    PATH: `${binDir}${path.delimiter}${process.env.PATH ?? ''}`,
    AGENTD_SIM_ROOT: tmp.root,
    AGENTD_SIM_FAULTS: '',
  };
});

afterAll(async () => {
  await tmp?.cleanup();
  if (binDir) await rm(binDir, { recursive: true, force: true });
});

function manager(extraEnv: NodeJS.ProcessEnv = {}) {
  const runner = createExecaRunner({ env: { ...env, ...extraEnv }, defaultTimeoutMs: 20_000 });
  const sim = createSimHost({ root: tmp.root }); // reads the state the executables write
  const machines = createMachineManager({
    runner,
    paths: createHostPaths(tmp.root),
    clock: createFakeClock(),
    kubeletHealth: (m) => sim.kubeletHealthy(m),
  });
  return { runner, sim, machines };
}

describe('sim executables on PATH', () => {
  it('installs wrappers that resolve to the sim, not to a system tool', async () => {
    const { stdout } = await execa(
      'sh',
      ['-c', 'for t in machinectl systemctl systemd-run; do command -v "$t"; done'],
      { env },
    );
    expect(stdout.split('\n')).toEqual(
      ['machinectl', 'systemctl', 'systemd-run'].map((t) => path.join(binDir, t)),
    );
  });

  it('start → services → verify → stop → remove through the execa runner', async () => {
    const { machines, sim } = manager();
    await prepareMachine(tmp.root, 'kube1', { kubeletVersion: '1.34.0' });
    await machines.daemonReload();
    await machines.start('kube1');
    await machines.startServices('kube1');
    await machines.verify('kube1', { timeoutMs: 10_000 });
    expect(await machines.inspect('kube1')).toEqual({
      name: 'kube1',
      registered: true,
      running: true,
      kubelet: 'active',
      healthy: true,
    });

    await machines.stop('kube1');
    expect(await machines.inspect('kube1')).toMatchObject({ registered: false, running: false });
    await machines.remove('kube1');
    await expect(access(createHostPaths(tmp.root).machineDir('kube1'))).rejects.toThrow();
    const snap = await sim.snapshot();
    expect(snap.daemonReloads).toBeGreaterThanOrEqual(1);
    expect(snap.machines.kube1).toMatchObject({ registration: 'none', imageExists: false, enabled: false });
  });

  it('recovers a stale registration left by another process', async () => {
    const { machines, sim } = manager();
    await prepareMachine(tmp.root, 'kube2');
    await sim.crashMachine('kube2');
    await machines.start('kube2');
    expect((await sim.snapshot()).machines.kube2.running).toBe(true);
    await machines.stop('kube2');
  });

  it('reads faults from AGENTD_SIM_FAULTS', async () => {
    const { machines } = manager({ AGENTD_SIM_FAULTS: 'kubelet-inactive:kube2' });
    await prepareMachine(tmp.root, 'kube2');
    await machines.start('kube2');
    await machines.startServices('kube2');
    const err = await machines.verify('kube2', { timeoutMs: 2_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentError);
    expect((err as AgentError).code).toBe('VERIFY_FAILED');
    expect((err as AgentError).data.lastState).toBe('kubelet.service is activating');
    await machines.stop('kube2');
  });

  it('serializes writers across processes', async () => {
    const { runner, sim } = manager();
    const before = (await sim.snapshot()).daemonReloads;
    await Promise.all(Array.from({ length: 8 }, () => runner.run('systemctl', ['daemon-reload'])));
    expect((await sim.snapshot()).daemonReloads).toBe(before + 8);
  });

  it('rejects an unsupported command line with exit 1 and the sim message', async () => {
    const { runner } = manager();
    const res = await runner.run('machinectl', ['reboot', 'kube1'], { reject: false });
    expect(res).toMatchObject({ exitCode: 1, stderr: 'sim: unsupported command: machinectl reboot kube1' });
  });

  it('prints what the model printed and exits with its code', async () => {
    const { runner } = manager();
    const res = await runner.run('machinectl', ['show', 'kube1'], { reject: false });
    expect(res).toMatchObject({ exitCode: 1, stdout: '' });
    expect(res.stderr.trim()).toBe("Could not get path to machine: No machine 'kube1' known");
  });

  it('fails clearly when AGENTD_SIM_ROOT is unset or the faults are bad', async () => {
    const unset = await execa('machinectl', ['show', 'kube1'], {
      env: { PATH: env.PATH },
      extendEnv: false,
      reject: false,
    });
    expect(unset.exitCode).toBe(2);
    expect(unset.stderr).toMatch(/AGENTD_SIM_ROOT is not set/);
    const bad = await execa('machinectl', ['show', 'kube1'], {
      env: { ...env, AGENTD_SIM_FAULTS: 'explode:kube1' },
      extendEnv: false,
      reject: false,
    });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/AGENTD_SIM_FAULTS entry "explode:kube1"/);
  });
});
