/** Diagnostics of a failed machine, through the simulated host: the exact command lines, never a throw. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { captureMachineDiagnostics } from '../../../src/host/machine-diagnostics.js';
import type { CommandResult, CommandRunner } from '../../../src/host/types.js';
import { parseSimFaults } from '../../../src/sim/faults.js';
import { createSimHost } from '../../../src/sim/host/index.js';
import { makeTempRoot, prepareMachine, type TempRoot } from '../sim/host/sim-fixtures.js';
import { createFakeClock } from './fake-clock.js';

let tmp: TempRoot;
beforeEach(async () => {
  tmp = await makeTempRoot('agentd-diag-');
});
afterEach(() => tmp.cleanup());

function sim(faults = ''): CommandRunner {
  return createSimHost({ root: tmp.root, clock: createFakeClock(), faults: parseSimFaults(faults) });
}

describe('captureMachineDiagnostics', () => {
  it('runs exactly the journal and unit-status commands', async () => {
    const lines: string[] = [];
    const runner: CommandRunner = {
      run: async (file, args): Promise<CommandResult> => {
        lines.push([file, ...args].join(' '));
        return { command: '', exitCode: 0, stdout: 'x', stderr: '', durationMs: 0 };
      },
    };
    await captureMachineDiagnostics(runner, 'kube2');
    expect(lines).toEqual([
      'systemd-run --machine=kube2 --pipe --wait journalctl -u kubelet.service -n 50 --no-pager',
      'systemd-run --machine=kube2 --pipe --wait journalctl -u containerd.service -n 50 --no-pager',
      'systemctl status systemd-nspawn@kube2.service --no-pager -n 20',
    ]);
  });

  it('a kubelet that never becomes active: its journal says why (the sim accepts the lines)', async () => {
    const host = sim('kubelet-inactive:kube2');
    await prepareMachine(tmp.root, 'kube2');
    await host.run('machinectl', ['start', 'kube2']);
    // As on real systemd, the machine's bus answers only from the second probe on.
    await host.run('systemd-run', ['--machine=kube2', '--pipe', '--wait', '/bin/true'], { reject: false });
    await host.run('systemd-run', [
      '--machine=kube2',
      '--pipe',
      '--wait',
      'systemctl',
      'enable',
      '--now',
      'containerd.service',
    ]);
    await host.run(
      'systemd-run',
      ['--machine=kube2', '--pipe', '--wait', 'systemctl', 'enable', '--now', 'kubelet.service'],
      { reject: false },
    );
    const [kubelet, containerd, unit] = await captureMachineDiagnostics(host, 'kube2');
    expect(kubelet).toMatchObject({
      exitCode: 0,
      output: expect.stringContaining('fault kubelet-inactive:kube2'),
    });
    expect(kubelet?.error).toBeUndefined();
    expect(containerd?.output).toContain('containerd.service is active');
    expect(unit).toMatchObject({ exitCode: 0, output: expect.stringContaining('Active: active (running)') });
  });

  it('a machine that did not start: the unit status says failed; the journals say why they are missing', async () => {
    const host = sim('start-fails:kube2');
    await prepareMachine(tmp.root, 'kube2');
    await host.run('machinectl', ['start', 'kube2'], { reject: false });
    const [kubelet, , unit] = await captureMachineDiagnostics(host, 'kube2');
    expect(kubelet).toMatchObject({ exitCode: 1, error: 'exited with code 1' });
    expect(kubelet?.output).toMatch(/Failed to connect to bus: Host is down/);
    expect(unit).toMatchObject({ exitCode: 3, output: expect.stringContaining('Active: failed') });
    expect(unit?.error).toBeUndefined();
  });

  it('never throws: a runner that cannot run anything is recorded per command', async () => {
    const runner: CommandRunner = { run: () => Promise.reject(new Error('spawn ENOENT')) };
    const out = await captureMachineDiagnostics(runner, 'kube1');
    expect(out).toHaveLength(3);
    for (const d of out) expect(d).toMatchObject({ exitCode: null, error: 'spawn ENOENT' });
  });
});
