import { access, mkdir } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentError, TimeoutError } from '../../../src/errors.js';
import { createMachineManager, kubeletStateOf } from '../../../src/host/machines.js';
import type { MachineManager, MachineManagerOptions } from '../../../src/host/machines.js';
import type { MachineBus, MachineBusAnswer } from '../../../src/host/machine-bus.js';
import { createHostPaths } from '../../../src/host/paths.js';
import type { HostPaths } from '../../../src/host/paths.js';
import type { CommandResult, CommandRunner, RunOptions } from '../../../src/host/types.js';
import { parseSimFaults } from '../../../src/sim/faults.js';
import { createSimHost } from '../../../src/sim/host/index.js';
import type { SimHost } from '../../../src/sim/host/index.js';
import { makeTempRoot, prepareMachine } from '../sim/host/sim-fixtures.js';
import type { TempRoot } from '../sim/host/sim-fixtures.js';
import { createFakeClock } from './fake-clock.js';
import type { FakeClock } from './fake-clock.js';
import { expectBackoff } from '../../support/backoff.js';

type Intercept = (file: string, args: readonly string[]) => Promise<CommandResult> | undefined;

/** Wraps the sim host, records every command line, and lets a test replace chosen commands. */
function recording(inner: CommandRunner, intercept?: Intercept): CommandRunner & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    run(file: string, args: readonly string[], options?: RunOptions): Promise<CommandResult> {
      lines.push([file, ...args].join(' '));
      return intercept?.(file, args) ?? inner.run(file, args, options);
    },
  };
}

async function rejection(p: Promise<unknown>): Promise<AgentError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AgentError);
    return err as AgentError;
  }
  throw new Error('expected the promise to reject');
}

const exists = (p: string): Promise<boolean> =>
  access(p).then(
    () => true,
    () => false,
  );

let tmp: TempRoot;
let clock: FakeClock;
let paths: HostPaths;
let sim: SimHost;
let runner: ReturnType<typeof recording>;
let machines: MachineManager;

function setup(
  options: { faults?: string; intercept?: Intercept; overrides?: Partial<MachineManagerOptions> } = {},
): void {
  sim = createSimHost({ root: tmp.root, clock, faults: parseSimFaults(options.faults ?? '') });
  runner = recording(sim, options.intercept);
  machines = createMachineManager({
    runner,
    paths,
    clock,
    kubeletHealth: (m) => sim.kubeletHealthy(m),
    ...options.overrides,
  });
}

beforeEach(async () => {
  tmp = await makeTempRoot('agentd-machines-');
  clock = createFakeClock();
  paths = createHostPaths(tmp.root);
  setup();
});

afterEach(async () => {
  await tmp.cleanup();
});

describe('start', () => {
  it('enables and starts the machine, then waits until it answers', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    // The first probe finds no bus in the machine yet (as on real systemd); its unit still runs
    // (the container did not exit), so the next probe comes, and answers.
    expect(runner.lines).toEqual([
      'machinectl enable kube1',
      'machinectl start kube1',
      'systemd-run --machine=kube1 --pipe --wait /bin/true',
      'systemctl show --property=ActiveState --property=SubState --property=Result systemd-nspawn@kube1.service',
      'systemd-run --machine=kube1 --pipe --wait /bin/true',
    ]);
    const snap = await sim.snapshot();
    expect(snap.machines.kube1).toMatchObject({ enabled: true, running: true });
  });

  it('clears a stale registration ("already exists") and starts again', async () => {
    await prepareMachine(tmp.root, 'kube2');
    await sim.crashMachine('kube2');
    await machines.start('kube2');
    expect(runner.lines).toEqual([
      'machinectl enable kube2',
      'machinectl start kube2',
      'systemctl reset-failed systemd-nspawn@kube2.service',
      'machinectl terminate kube2',
      'machinectl show kube2',
      'machinectl start kube2',
      'systemd-run --machine=kube2 --pipe --wait /bin/true',
      'systemctl show --property=ActiveState --property=SubState --property=Result systemd-nspawn@kube2.service',
      'systemd-run --machine=kube2 --pipe --wait /bin/true',
    ]);
    expect((await sim.snapshot()).machines.kube2).toMatchObject({ running: true, serviceFailed: false });
  });

  it('fails with COMMAND_FAILED when the machine does not start (start-fails)', async () => {
    setup({ faults: 'start-fails:kube1' });
    await prepareMachine(tmp.root, 'kube1');
    const err = await rejection(machines.start('kube1'));
    expect(err.code).toBe('COMMAND_FAILED');
    expect(err.data.command).toBe('machinectl start kube1');
  });

  it('fails with COMMAND_FAILED when the rootfs is missing', async () => {
    const err = await rejection(machines.start('kube1'));
    expect(err.code).toBe('COMMAND_FAILED');
  });

  it('times out on the injected clock when the machine never answers', async () => {
    await prepareMachine(tmp.root, 'kube1');
    const never: Intercept = (file, args) =>
      file === 'systemd-run' && args.at(-1) === '/bin/true'
        ? Promise.resolve({ command: 'x', exitCode: 1, stdout: '', stderr: 'Host is down', durationMs: 0 })
        : undefined;
    setup({ intercept: never, overrides: { timeouts: { startMs: 5_000, pollIntervalMs: 1_000 } } });
    const started = clock.now();
    const err = await rejection(machines.start('kube1'));
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err.data).toMatchObject({ machine: 'kube1', timeoutMs: 5_000 });
    expect(clock.now() - started).toBe(5_000);
    // Fast first (the bus usually answers within half a second), then once per poll interval.
    expect(clock.sleeps).toEqual([100, 200, 400, 800, 1_000, 1_000, 1_000, 500]);
    expect(runner.lines.filter((l) => l.endsWith('/bin/true'))).toHaveLength(9);
  });

  it('fails at once when the container exits while booting (a machine that cannot boot)', async () => {
    await prepareMachine(tmp.root, 'kube1');
    const noInit: Intercept = (file, args) => {
      if (file === 'systemd-run' && args.at(-1) === '/bin/true') {
        return Promise.resolve({
          command: 'x',
          exitCode: 1,
          stdout: '',
          stderr: 'Failed to connect to bus: Host is down',
          durationMs: 0,
        });
      }
      if (file === 'systemctl' && args[0] === 'show') {
        const stdout = 'ActiveState=activating\nSubState=auto-restart\nResult=exit-code';
        return Promise.resolve({ command: 'x', exitCode: 0, stdout, stderr: '', durationMs: 0 });
      }
      return undefined;
    };
    setup({ intercept: noInit, overrides: { timeouts: { startMs: 60_000, pollIntervalMs: 1_000 } } });
    const started = clock.now();
    const err = await rejection(machines.start('kube1'));
    expect(err.code).toBe('COMMAND_FAILED');
    expect(err.message).toMatch(/machinectl start kube1: the machine's container exited while it booted/);
    expect(err.message).toMatch(/SubState=auto-restart Result=exit-code/);
    expect(clock.now() - started).toBe(0);
    expect(runner.lines).toContain(
      'systemctl show --property=ActiveState --property=SubState --property=Result systemd-nspawn@kube1.service',
    );
  });

  it('passes the per-command timeout to the runner (a slow host times out)', async () => {
    setup({ faults: 'latency=2000:kube1', overrides: { timeouts: { commandMs: 500 } } });
    await prepareMachine(tmp.root, 'kube1');
    const err = await rejection(machines.start('kube1'));
    expect(err.code).toBe('TIMEOUT');
  });

  it('is cancellable', async () => {
    await prepareMachine(tmp.root, 'kube1');
    const err = await rejection(machines.start('kube1', AbortSignal.abort()));
    expect(err.code).toBe('CANCELLED');
  });
});

describe('startServices and verify', () => {
  it('starts containerd then kubelet and verifies a healthy kubelet', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    runner.lines.length = 0;
    clock.sleeps.length = 0;
    await machines.startServices('kube1');
    await machines.verify('kube1', { timeoutMs: 10_000 });
    expect(runner.lines).toEqual([
      'systemd-run --machine=kube1 --pipe --wait systemctl enable --now containerd.service kubelet.service',
      'systemctl --machine=kube1 start --no-block default.target',
      'systemd-run --machine=kube1 --pipe --wait systemctl is-active kubelet.service',
    ]);
    expect(clock.sleeps).toEqual([]);
  });

  it('fails startServices with COMMAND_FAILED when containerd cannot start', async () => {
    await prepareMachine(tmp.root, 'kube1', { containerd: false });
    await machines.start('kube1');
    const err = await rejection(machines.startServices('kube1'));
    expect(err.code).toBe('COMMAND_FAILED');
  });

  it('fails verify with VERIFY_FAILED naming the machine and the last state when kubelet stays inactive', async () => {
    setup({ faults: 'kubelet-inactive:kube2', overrides: { timeouts: { pollIntervalMs: 2_000 } } });
    await prepareMachine(tmp.root, 'kube2');
    await machines.start('kube2');
    await machines.startServices('kube2');
    const started = clock.now();
    const err = await rejection(machines.verify('kube2', { timeoutMs: 30_000 }));
    expect(err.code).toBe('VERIFY_FAILED');
    expect(err.data).toMatchObject({ machine: 'kube2', lastState: 'kubelet.service is activating' });
    expect(err.message).toContain('kube2');
    expect(clock.now() - started).toBe(30_000);
  });

  it('uses the default verify timeout from the timeouts', async () => {
    setup({ faults: 'kubelet-inactive:*', overrides: { timeouts: { verifyMs: 7_000 } } });
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    const started = clock.now();
    const err = await rejection(machines.verify('kube1'));
    expect(err.code).toBe('VERIFY_FAILED');
    expect(clock.now() - started).toBe(7_000);
  });

  it('fails verify when kubelet is active but its health endpoint never answers', async () => {
    setup({ overrides: { kubeletHealth: () => Promise.resolve(false) } });
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    await machines.startServices('kube1');
    const err = await rejection(machines.verify('kube1', { timeoutMs: 3_000 }));
    expect(err.code).toBe('VERIFY_FAILED');
    expect(err.data.lastState).toMatch(/health endpoint/);
  });

  it('fails verify of a machine that is not running with the connection error as last state', async () => {
    const err = await rejection(machines.verify('kube1', { timeoutMs: 2_000 }));
    expect(err.code).toBe('VERIFY_FAILED');
    expect(err.data.lastState).toMatch(/Failed to connect to bus: Host is down/);
  });

  it('waits for a kubelet that becomes active during the poll', async () => {
    // kube1 holds the kubelet ports; kube2's kubelet crash-loops until kube1 stops.
    await prepareMachine(tmp.root, 'kube1');
    await prepareMachine(tmp.root, 'kube2');
    await machines.start('kube1');
    await machines.startServices('kube1');
    await machines.start('kube2');
    await machines.startServices('kube2');
    let probes = 0;
    setup({
      intercept: (file, args) => {
        if (args.at(-1) === 'kubelet.service' && args.includes('is-active') && ++probes === 3) {
          return sim
            .run('systemctl', ['stop', 'systemd-nspawn@kube1.service'])
            .then(() => sim.run(file, args, { reject: false }));
        }
        return undefined;
      },
    });
    await machines.verify('kube2', { timeoutMs: 60_000 });
    expect(probes).toBe(3);
  });
});

describe('stop', () => {
  it('stops kubelet, containerd, then the machine', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    await machines.startServices('kube1');
    runner.lines.length = 0;
    await machines.stop('kube1');
    expect(runner.lines).toEqual([
      'systemd-run --machine=kube1 --pipe --wait systemctl stop kubelet.service',
      'systemd-run --machine=kube1 --pipe --wait systemctl stop containerd.service',
      'machinectl disable kube1',
      'systemctl stop systemd-nspawn@kube1.service',
      'machinectl show kube1',
    ]);
    const snap = await sim.snapshot();
    expect(snap.machines.kube1).toMatchObject({ running: false, enabled: false, registration: 'none' });
  });

  it('succeeds for a machine that is not running (or does not exist)', async () => {
    await machines.stop('kube2');
    expect(runner.lines).not.toContain('machinectl terminate kube2');
  });

  it('terminates a machine that stays registered, as a last resort', async () => {
    setup({ overrides: { timeouts: { stopMs: 4_000 } } });
    await prepareMachine(tmp.root, 'kube1');
    await sim.crashMachine('kube1');
    const started = clock.now();
    await machines.stop('kube1');
    expect(runner.lines.at(-2)).toBe('machinectl terminate kube1');
    expect(clock.now() - started).toBe(4_000);
    expect((await sim.snapshot()).machines.kube1.registration).toBe('none');
  });

  it('fails with TIMEOUT when even terminate does not unregister the machine', async () => {
    const stuck: Intercept = (file, args) =>
      file === 'machinectl' && (args[0] === 'show' || args[0] === 'terminate')
        ? Promise.resolve({ command: 'x', exitCode: 0, stdout: 'Name=kube1', stderr: '', durationMs: 0 })
        : undefined;
    setup({ intercept: stuck, overrides: { timeouts: { stopMs: 3_000 } } });
    const err = await rejection(machines.stop('kube1'));
    expect(err.code).toBe('TIMEOUT');
    expect(err.data.machine).toBe('kube1');
  });
});

describe('remove', () => {
  it('removes a stopped machine with machinectl remove', async () => {
    await prepareMachine(tmp.root, 'kube2');
    await machines.remove('kube2');
    expect(runner.lines).toEqual(['machinectl remove kube2']);
    expect(await exists(paths.machineDir('kube2'))).toBe(false);
  });

  it('succeeds without commands when the machine is absent', async () => {
    await machines.remove('kube1');
    expect(runner.lines).toEqual([]);
  });

  it('retries with backoff, then removes the directory itself', async () => {
    const busy: Intercept = (file, args) =>
      file === 'machinectl' && args[0] === 'remove'
        ? Promise.resolve({
            command: 'x',
            exitCode: 1,
            stdout: '',
            stderr: 'Could not remove image: busy',
            durationMs: 0,
          })
        : undefined;
    setup({ intercept: busy });
    await prepareMachine(tmp.root, 'kube1');
    await mkdir(`${paths.machineDir('kube1')}/var/lib/kubelet`, { recursive: true });
    await machines.remove('kube1');
    expect(runner.lines).toEqual([
      'machinectl remove kube1',
      'machinectl remove kube1',
      'machinectl remove kube1',
      'machinectl show kube1',
    ]);
    expectBackoff(clock.sleeps, [1_000, 2_000]);
    expect(await exists(paths.machineDir('kube1'))).toBe(false);
  });

  it('refuses to delete the rootfs of a machine that is still registered', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    const err = await rejection(machines.remove('kube1'));
    expect(err.code).toBe('PRECONDITION_FAILED');
    expect(await exists(paths.machineDir('kube1'))).toBe(true);
  });
});

describe('daemonReload', () => {
  it('runs systemctl daemon-reload', async () => {
    await machines.daemonReload();
    expect(runner.lines).toEqual(['systemctl daemon-reload']);
    expect((await sim.snapshot()).daemonReloads).toBe(1);
  });
});

describe('inspect', () => {
  it('reports an absent machine without throwing', async () => {
    expect(await machines.inspect('kube1')).toEqual({
      name: 'kube1',
      registered: false,
      running: false,
      kubelet: 'inactive',
      healthy: false,
    });
  });

  it('reports a running machine and its kubelet', async () => {
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    expect((await machines.inspect('kube1')).kubelet).toBe('inactive');
    await machines.startServices('kube1');
    expect(await machines.inspect('kube1')).toEqual({
      name: 'kube1',
      registered: true,
      running: true,
      kubelet: 'active',
      healthy: true,
    });
  });

  /** kube1 started with its services, as a join leaves it. */
  const runningKube1 = async (): Promise<void> => {
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    await machines.startServices('kube1');
  };
  /** What `inspect` returned and the command lines it ran. */
  const inspected = async (m: 'kube1' | 'kube2') => {
    const before = runner.lines.length;
    const seen = await machines.inspect(m);
    return { seen, lines: runner.lines.slice(before) };
  };
  const running = { name: 'kube1', registered: true, running: true, kubelet: 'active', healthy: true };
  const gone = { name: 'kube1', registered: false, running: false, kubelet: 'inactive', healthy: false };

  it('asks the machine’s systemd over its bus: no systemd-run, which leaves a unit in the machine', async () => {
    await runningKube1();
    expect(await inspected('kube1')).toEqual({
      seen: running,
      lines: ['machinectl show kube1', 'systemctl --machine=kube1 is-active kubelet.service'],
    });
  });

  it('asks a machine that ran at its last inspection first, and falls back once it stops', async () => {
    await runningKube1();
    await machines.inspect('kube1');
    // Its systemd answers: it is registered and runs, without asking machined.
    expect(await inspected('kube1')).toEqual({
      seen: running,
      lines: ['systemctl --machine=kube1 is-active kubelet.service'],
    });
    await machines.stop('kube1');
    // No answer now: machined says it is gone, and the result is what a first look gives.
    expect(await inspected('kube1')).toEqual({
      seen: gone,
      lines: ['systemctl --machine=kube1 is-active kubelet.service', 'machinectl show kube1'],
    });
    // And the next look starts with machined again.
    expect((await inspected('kube1')).lines).toEqual(['machinectl show kube1']);
  });

  it('reports a machine that ran and then crashed as registered but not running', async () => {
    await runningKube1();
    await machines.inspect('kube1');
    await sim.crashMachine('kube1');
    expect(await inspected('kube1')).toEqual({
      seen: { ...gone, registered: true },
      lines: ['systemctl --machine=kube1 is-active kubelet.service', 'machinectl show kube1'],
    });
  });

  it('reports a crash-looping kubelet as failed', async () => {
    setup({ faults: 'kubelet-inactive:kube1' });
    await prepareMachine(tmp.root, 'kube1');
    await machines.start('kube1');
    await machines.startServices('kube1');
    expect((await machines.inspect('kube1')).kubelet).toBe('failed');
  });

  it('reports a stale registration as registered but not running', async () => {
    await sim.crashMachine('kube2');
    expect(await machines.inspect('kube2')).toMatchObject({ registered: true, running: false });
  });

  describe('with a bus (machine-bus.ts)', () => {
    /** A bus that answers `answers` in turn, recording what it was asked. */
    const scripted = (answers: Array<MachineBusAnswer | null>) => {
      const asked: string[] = [];
      const bus: MachineBus = {
        inspect: (m) => {
          asked.push(m);
          return Promise.resolve(answers.shift() ?? null);
        },
        close: () => undefined,
      };
      return { bus, asked };
    };

    it('takes the bus’s answer and runs no command: an absent machine', async () => {
      const { bus, asked } = scripted([{ registered: false }]);
      setup({ overrides: { bus } });
      expect(await inspected('kube2')).toEqual({ seen: { ...gone, name: 'kube2' }, lines: [] });
      expect(asked).toEqual(['kube2']);
    });

    it('takes the bus’s answer and runs no command: a running machine, its kubelet’s state and health', async () => {
      await runningKube1();
      const { bus } = scripted([
        { registered: true, activeState: 'active' },
        { registered: true, activeState: 'activating' },
      ]);
      setup({ overrides: { bus } });
      expect(await inspected('kube1')).toEqual({ seen: running, lines: [] });
      expect(await inspected('kube1')).toEqual({
        seen: { ...running, kubelet: 'failed', healthy: false },
        lines: [],
      });
    });

    it('runs the commands when the bus cannot say, with the same result', async () => {
      await runningKube1();
      const { bus, asked } = scripted([null]);
      setup({ overrides: { bus } });
      expect(await inspected('kube1')).toEqual({
        seen: running,
        lines: ['machinectl show kube1', 'systemctl --machine=kube1 is-active kubelet.service'],
      });
      expect(asked).toEqual(['kube1']);
    });
  });

  it('reports unknown when the host cannot be asked', async () => {
    setup({ intercept: () => Promise.reject(new Error('host bus gone')) });
    expect(await machines.inspect('kube2')).toMatchObject({ registered: false, kubelet: 'unknown' });
  });
});

describe('kubeletStateOf', () => {
  it.each([
    ['active', 'active'],
    ['reloading', 'active'],
    ['inactive', 'inactive'],
    ['deactivating', 'inactive'],
    ['activating', 'failed'],
    ['failed', 'failed'],
    ['', 'unknown'],
    ['maintenance', 'unknown'],
  ])('maps %j to %s', (word, state) => {
    expect(kubeletStateOf(word)).toBe(state);
  });
});
