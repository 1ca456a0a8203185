/**
 * `runUpdate` with a fake machine manager and provisioner: the order of host steps, the
 * journal at the end, and what each phase's failure leads to (docs/architecture.md).
 */
import { describe, expect, it } from 'vitest';
import { readJournal } from '../../../src/engine/journal.js';
import { readNodeState } from '../../../src/engine/node-state.js';
import { UPDATE_PHASES, runUpdate, type NodeDrainer } from '../../../src/engine/update.js';
import type { AgentError } from '../../../src/errors.js';
import {
  CancelledError,
  CommandFailedError,
  DownloadFailedError,
  ImagePullFailedError,
  TimeoutError,
  VerifyFailedError,
} from '../../../src/errors.js';
import { HealthChecksSchema } from '../../../src/fleet/health-checks-schema.js';
import { createHealthGate } from '../../../src/fleet/health-gate.js';
import type { HealthGate, MachineExec } from '../../../src/fleet/health-gate.js';
import { configAt, createEngineFixture, silentLogger, type EngineFixture } from './fakes.js';

const OLD = configAt('1.34.0');
const NEW = configAt('1.35.0');

/** A fixture whose node runs kube1 on OLD (as a join left it). */
async function joinedFixture(): Promise<EngineFixture> {
  const f = await createEngineFixture();
  await f.applied.write('kube1', OLD);
  f.machines.running.add('kube1');
  f.machines.present.add('kube1');
  return f;
}

async function switchToKube2(f: EngineFixture, signal = new AbortController().signal, drain = false) {
  const rec = f.recorder(UPDATE_PHASES);
  const outcome = await runUpdate(
    f.deps,
    rec,
    { source: 'kube1', target: 'kube2', config: NEW, drain },
    signal,
  );
  return { rec, outcome, phases: Object.fromEntries(rec.op.phases.map((p) => [p.name, p.state])) };
}

/** What undoing a target before stop does. */
const REMOVE_KUBE2 = ['stop kube2', 'remove kube2', 'removeMachineFiles kube2', 'daemonReload'];

describe('runUpdate: success', () => {
  it('join (no source): provision, stage, start, verify and commit kube1; stop and cleanup skipped', async () => {
    const f = await createEngineFixture();
    const rec = f.recorder(UPDATE_PHASES);
    const outcome = await runUpdate(
      f.deps,
      rec,
      { source: null, target: 'kube1', config: OLD, drain: false },
      new AbortController().signal,
    );
    expect(outcome.state).toBe('succeeded');
    expect(f.log.calls).toEqual([
      'preflight',
      'provision kube1',
      'stage kube1',
      'start kube1',
      'startServices kube1',
      'verify kube1',
    ]);
    expect(Object.fromEntries(rec.op.phases.map((p) => [p.name, p.state]))).toEqual({
      preflight: 'succeeded',
      provision: 'succeeded',
      slot: 'skipped',
      stage: 'succeeded',
      standby: 'skipped',
      drain: 'skipped',
      stop: 'skipped',
      start: 'succeeded',
      verify: 'succeeded',
      health: 'skipped',
      commit: 'succeeded',
      cleanup: 'skipped',
      uncordon: 'skipped',
    });
    expect((await f.applied.read('kube1'))?.config.Cluster.Version).toBe('1.34.0');
    expect((await readNodeState(f.stateDir))?.activeMachine).toBe('kube1');
    expect(await readJournal(f.stateDir)).toMatchObject({
      kind: 'update',
      source: null,
      target: 'kube1',
      committed: true,
      sourceStopped: false,
      closed: true,
      outcome: 'succeeded',
    });
    expect(outcome.result.downWindowMs).toBeUndefined();
  });

  it('switch: everything of kube2 is ready before kube1 stops; kube1 is removed after the commit', async () => {
    const f = await joinedFixture();
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('succeeded');
    expect(f.log.calls).toEqual([
      'preflight',
      'provision kube2',
      'stage kube2',
      'stop kube1',
      'start kube2',
      'startServices kube2',
      'verify kube2',
      'remove kube1',
      'removeMachineFiles kube1',
      'daemonReload',
    ]);
    expect(phases).toMatchObject({ stop: 'succeeded', commit: 'succeeded', cleanup: 'succeeded' });
    expect(await f.applied.read('kube1')).toBeNull();
    expect((await f.applied.read('kube2'))?.config.Cluster.Version).toBe('1.35.0');
    expect((await readNodeState(f.stateDir))?.activeMachine).toBe('kube2');
    expect(outcome.result).toMatchObject({
      changed: true,
      from: 'kube1',
      to: 'kube2',
      imageDigest: 'sha256:feed',
    });
    // The down window is measured on the injected clock (the fakes take no time).
    expect(outcome.result.downWindowMs).toBe(0);
    expect(await readJournal(f.stateDir)).toMatchObject({
      committed: true,
      closed: true,
      outcome: 'succeeded',
    });
  });

  it('a failed cleanup is a warning: the update succeeded and recovery retries later', async () => {
    const f = await joinedFixture();
    f.log.fail('remove kube1');
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('succeeded');
    expect(phases.cleanup).toBe('failed');
    expect(outcome.result.warnings).toEqual([expect.stringContaining('cleanup of kube1 failed')]);
    expect((await readNodeState(f.stateDir))?.activeMachine).toBe('kube2');
  });

  it('with drain: cordons before stop and uncordons after cleanup when it cordoned', async () => {
    const f = await joinedFixture();
    const drainer: NodeDrainer = {
      drain: async () => {
        f.log.calls.push('drain');
        return { cordonedByUs: true, result: { evicted: [] } };
      },
      uncordon: async () => {
        f.log.calls.push('uncordon');
      },
    };
    f.deps.drainer = drainer;
    const { outcome, phases } = await switchToKube2(f, undefined, true);
    expect(outcome.state).toBe('succeeded');
    expect(phases).toMatchObject({ drain: 'succeeded', uncordon: 'succeeded' });
    const calls = f.log.calls;
    expect(calls.indexOf('drain')).toBeLessThan(calls.indexOf('stop kube1'));
    expect(calls.at(-1)).toBe('uncordon');
  });
});

describe('runUpdate: failure before stop removes the target and never touches the source', () => {
  it.each([
    ['preflight', 'preflight'],
    ['provision', 'provision kube2'],
    ['stage', 'stage kube2'],
  ])('%s fails → failed', async (phase, call) => {
    const f = await joinedFixture();
    f.log.fail(call);
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('failed');
    expect((outcome.error as AgentError).code).toBe('COMMAND_FAILED');
    expect(phases[phase]).toBe('failed');
    expect(phases).toMatchObject({ stop: 'skipped', start: 'skipped', commit: 'skipped' });
    expect(f.log.calls.slice(f.log.calls.indexOf(call) + 1)).toEqual(REMOVE_KUBE2);
    expect(f.log.calls).not.toContain('stop kube1');
    expect(f.machines.running).toEqual(new Set(['kube1']));
    expect(await readJournal(f.stateDir)).toMatchObject({
      sourceStopped: false,
      closed: true,
      outcome: 'failed',
    });
    expect((await readNodeState(f.stateDir))?.activeMachine ?? 'kube1').toBe('kube1');
  });

  it.each([
    [['image'], 'IMAGE_PULL_FAILED'],
    [['artifact:kubelet'], 'DOWNLOAD_FAILED'],
    [['artifacts'], 'DOWNLOAD_FAILED'],
    [['disk-space'], 'NO_SPACE'],
    [['host-paths'], 'PRECONDITION_FAILED'],
    [['disk-space', 'artifact:kubelet', 'image'], 'IMAGE_PULL_FAILED'],
    [['disk-space', 'artifact:kubelet'], 'DOWNLOAD_FAILED'],
  ])('failed preflight checks %j → %s', async (names, code) => {
    const f = await joinedFixture();
    f.provisioner.checks = names.map((name) => ({ name, ok: false, message: `${name} is not there` }));
    const { outcome } = await switchToKube2(f);
    expect(outcome.state).toBe('failed');
    expect((outcome.error as AgentError).code).toBe(code);
    expect(f.log.calls).not.toContain('provision kube2');
  });

  it('a failed preflight check names the check, nothing provisioned', async () => {
    const f = await joinedFixture();
    f.provisioner.checks = [
      { name: 'image', ok: false, message: 'manifest unknown' },
      { name: 'disk-space', ok: true, message: 'plenty' },
    ];
    const { outcome } = await switchToKube2(f);
    expect(outcome.state).toBe('failed');
    expect(outcome.error).toMatchObject({
      code: 'IMAGE_PULL_FAILED',
      data: { checks: [{ name: 'image' }] },
    });
    expect((outcome.error as Error).message).toContain('image: manifest unknown');
    expect(f.log.calls).not.toContain('provision kube2');
  });

  it('a running target → PRECONDITION_FAILED, refusing to overwrite it', async () => {
    const f = await joinedFixture();
    f.machines.running.add('kube2');
    const { outcome } = await switchToKube2(f);
    expect(outcome.error).toMatchObject({ code: 'PRECONDITION_FAILED' });
    expect((outcome.error as Error).message).toContain('kube2 is running');
    expect(f.log.calls).not.toContain('provision kube2');
  });

  it('cancel during provision → cancelled, the phase marked cancelled, the target removed', async () => {
    const f = await joinedFixture();
    const held = f.log.hold('provision kube2');
    const controller = new AbortController();
    const running = switchToKube2(f, controller.signal);
    await held.reached;
    controller.abort(new CancelledError('test'));
    const { outcome, phases } = await running;
    expect(outcome.state).toBe('cancelled');
    expect((outcome.error as AgentError).code).toBe('CANCELLED');
    expect(phases).toMatchObject({ provision: 'cancelled', stage: 'skipped', stop: 'skipped' });
    expect(f.log.calls.slice(-REMOVE_KUBE2.length)).toEqual(REMOVE_KUBE2);
    expect(await readJournal(f.stateDir)).toMatchObject({ closed: true, outcome: 'cancelled' });
  });

  it('with drain: cancelled between drain and stop → uncordons what it cordoned', async () => {
    const f = await joinedFixture();
    const controller = new AbortController();
    f.deps.drainer = {
      drain: async () => {
        // The cancel arrives while the drain runs; the drain itself completes.
        controller.abort(new CancelledError('test'));
        return { cordonedByUs: true, result: {} };
      },
      uncordon: async () => {
        f.log.calls.push('uncordon');
      },
    };
    f.log.fail('daemonReload'); // an undo step failing does not stop the others
    const { outcome, phases } = await switchToKube2(f, controller.signal, true);
    expect(outcome.state).toBe('cancelled');
    expect(phases).toMatchObject({ drain: 'succeeded', stop: 'skipped' });
    expect(f.log.calls).not.toContain('stop kube1');
    expect(f.log.calls.at(-1)).toBe('uncordon');
    expect(outcome.result.undo).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ step: 'daemon-reload', ok: false }),
        expect.objectContaining({ step: 'uncordon', ok: true }),
      ]),
    );
  });
});

describe('runUpdate: failure after stop rolls back to the source', () => {
  it('publishes the phases that never ran as skipped before the rollback starts', async () => {
    const f = await joinedFixture();
    f.log.fail('start kube2');
    await switchToKube2(f);
    const phaseEvents = f.published.flatMap((e) => (e.type === 'phase' ? [`${e.phase} ${e.state}`] : []));
    const from = phaseEvents.indexOf('start failed');
    // A follower prints these in this order: the skipped phases end where the update stopped.
    expect(phaseEvents.slice(from)).toEqual([
      'start failed',
      'verify skipped',
      'health skipped',
      'commit skipped',
      'cleanup skipped',
      'uncordon skipped',
      'rollback running',
      'rollback succeeded',
    ]);
  });

  it.each([
    ['stop', 'stop kube1', 'COMMAND_FAILED'],
    ['start', 'start kube2', 'MACHINE_START_FAILED'],
    ['start', 'startServices kube2', 'MACHINE_START_FAILED'],
    ['verify', 'verify kube2', 'VERIFY_FAILED'],
  ])(
    '%s fails (%s) → rolled_back with %s: target stopped, source back, target removed',
    async (phase, call, code) => {
      const f = await joinedFixture();
      f.log.fail(call);
      const { outcome, phases } = await switchToKube2(f);
      expect(outcome.state).toBe('rolled_back');
      expect((outcome.error as AgentError).code).toBe(code);
      expect(phases[phase]).toBe('failed');
      expect(phases).toMatchObject({ commit: 'skipped', cleanup: 'skipped', rollback: 'succeeded' });
      expect(f.log.calls.slice(f.log.calls.indexOf(call) + 1)).toEqual([
        'stop kube2',
        'start kube1',
        'startServices kube1',
        'verify kube1',
        'remove kube2',
        'removeMachineFiles kube2',
        'daemonReload',
      ]);
      expect(f.machines.running).toEqual(new Set(['kube1']));
      expect(await f.applied.read('kube2')).toBeNull();
      expect((await f.applied.read('kube1'))?.config.Cluster.Version).toBe('1.34.0');
      expect(await readJournal(f.stateDir)).toMatchObject({
        sourceStopped: true,
        committed: false,
        closed: true,
        outcome: 'rolled_back',
      });
    },
  );

  it('a failed commit (applied config not written) rolls back too', async () => {
    const f = await joinedFixture();
    const write = f.applied.write.bind(f.applied);
    f.deps.applied = {
      ...f.applied,
      write: async (m, c) => (m === 'kube2' ? Promise.reject(new Error('EIO: disk gone')) : write(m, c)),
    };
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('rolled_back');
    expect(phases.commit).toBe('failed');
    expect(f.machines.running).toEqual(new Set(['kube1']));
  });

  it('the source does not come back either → failed with both reasons', async () => {
    const f = await joinedFixture();
    f.log.fail('verify kube2');
    f.log.fail('start kube1');
    const { rec, outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('failed');
    expect(phases.rollback).toBe('failed');
    const err = outcome.error as AgentError;
    expect(err.code).toBe('ROLLBACK_FAILED');
    expect(err.message).toMatch(
      /^verify: .*verify kube2 failed; rollback to kube1 failed too: start kube1: .*start kube1 failed/,
    );
    expect(err.data).toMatchObject({ failure: { code: 'VERIFY_FAILED' } });
    // The rollback phase says what failed, with a code of its own (never INTERNAL).
    expect(rec.op.phases.find((p) => p.name === 'rollback')?.error).toMatchObject({
      code: 'ROLLBACK_FAILED',
      data: { machine: 'kube1' },
    });
    // The target is not removed: it is all that is left to investigate with.
    expect(f.log.calls).not.toContain('remove kube2');
    expect(await readJournal(f.stateDir)).toMatchObject({ closed: true, outcome: 'failed' });
  });
});

describe('runUpdate: the code every phase ends with', () => {
  const plain = (): Error => new Error('something the code did not expect');
  it.each([
    ['preflight', 'preflight', () => new CommandFailedError('df', 1, 'gone'), 'COMMAND_FAILED'],
    ['provision', 'provision kube2', () => new DownloadFailedError('GET x: 404'), 'DOWNLOAD_FAILED'],
    ['provision', 'provision kube2', () => new ImagePullFailedError('no manifest'), 'IMAGE_PULL_FAILED'],
    ['stage', 'stage kube2', () => new CommandFailedError('x', 1, ''), 'COMMAND_FAILED'],
    ['stop', 'stop kube1', () => new CommandFailedError('systemctl stop', 1, ''), 'COMMAND_FAILED'],
    [
      'start',
      'start kube2',
      () => new CommandFailedError('machinectl start kube2', 1, ''),
      'MACHINE_START_FAILED',
    ],
    ['start', 'start kube2', () => new TimeoutError('start machine kube2', 10), 'MACHINE_START_FAILED'],
    ['start', 'start kube2', plain, 'MACHINE_START_FAILED'],
    ['start', 'startServices kube2', plain, 'MACHINE_START_FAILED'],
    ['verify', 'verify kube2', () => new VerifyFailedError('kubelet inactive'), 'VERIFY_FAILED'],
    ['verify', 'verify kube2', plain, 'VERIFY_FAILED'],
  ])('%s failing at %s ends with %s (never INTERNAL)', async (phase, call, error, code) => {
    const f = await joinedFixture();
    f.log.fail(call, error());
    const { rec, outcome } = await switchToKube2(f);
    expect((outcome.error as AgentError).code).toBe(code);
    expect(rec.op.phases.find((p) => p.name === phase)?.error?.code).toBe(code);
  });

  it('start failure keeps the cause: its code and the command data', async () => {
    const f = await joinedFixture();
    f.log.fail('start kube2', new CommandFailedError('machinectl start kube2', 1, 'Job failed'));
    const { outcome } = await switchToKube2(f);
    expect((outcome.error as AgentError).data).toMatchObject({
      machine: 'kube2',
      causeCode: 'COMMAND_FAILED',
      command: 'machinectl start kube2',
      exitCode: 1,
    });
  });

  it('rollback: the phase and the operation end ROLLBACK_FAILED when the source does not come back', async () => {
    const f = await joinedFixture();
    f.log.fail('start kube2');
    f.log.fail('startServices kube1', new Error('unexpected'));
    const { rec, outcome } = await switchToKube2(f);
    expect((outcome.error as AgentError).code).toBe('ROLLBACK_FAILED');
    expect(rec.op.phases.find((p) => p.name === 'rollback')?.error?.code).toBe('ROLLBACK_FAILED');
  });
});

describe('runUpdate: diagnostics of a failed target', () => {
  const captured = [
    { what: 'kubelet.service journal in kube2', command: 'systemd-run …', exitCode: 0, output: 'boom' },
  ];

  it.each([
    ['start kube2', 'MACHINE_START_FAILED'],
    ['verify kube2', 'VERIFY_FAILED'],
  ])('captured before the target is removed when %s fails, into the error data', async (call) => {
    const f = await joinedFixture();
    f.deps.diagnostics = async (m) => {
      f.log.calls.push(`diagnostics ${m}`);
      return captured;
    };
    f.log.fail(call);
    const { outcome } = await switchToKube2(f);
    expect((outcome.error as AgentError).data.diagnostics).toEqual(captured);
    expect(f.log.calls.indexOf('diagnostics kube2')).toBeLessThan(f.log.calls.indexOf('remove kube2'));
    expect(f.log.calls.indexOf('diagnostics kube2')).toBeGreaterThan(f.log.calls.indexOf(call));
  });

  it('kept once, at the top, when the rollback fails too', async () => {
    const f = await joinedFixture();
    f.deps.diagnostics = async () => captured;
    f.log.fail('verify kube2');
    f.log.fail('start kube1');
    const { outcome } = await switchToKube2(f);
    const data = (outcome.error as AgentError).data as {
      diagnostics: unknown;
      failure: { data?: Record<string, unknown> };
    };
    expect(data.diagnostics).toEqual(captured);
    expect(data.failure.data?.diagnostics).toBeUndefined();
  });

  it('not captured for a failure before the target started', async () => {
    const f = await joinedFixture();
    let asked = false;
    f.deps.diagnostics = async () => {
      asked = true;
      return captured;
    };
    f.log.fail('stage kube2');
    await switchToKube2(f);
    expect(asked).toBe(false);
  });
});

describe('runUpdate: the health gate', () => {
  /** A gate with one exec check whose exit code `exitCode` gives, and a Node reporting `kubelet`. */
  function gateFor(
    f: EngineFixture,
    exitCode: () => number,
    kubelet = 'v1.35.0',
    withPolicy = true,
  ): HealthGate {
    const exec: MachineExec = (m, argv) => {
      f.log.calls.push(`exec ${m} ${argv.join(' ')}`);
      return Promise.resolve({
        command: argv.join(' '),
        exitCode: exitCode(),
        stdout: '',
        stderr: '',
        durationMs: 1,
      });
    };
    return createHealthGate({
      checks: () =>
        !withPolicy
          ? null
          : HealthChecksSchema.parse({
              nodeReadyTimeoutSeconds: 5,
              checks: [{ name: 'app', timeoutSeconds: 5, exec: { command: ['/bin/app-ready'] } }],
            }),
      node: () => ({
        read: () =>
          Promise.resolve({ name: 'w', ready: true, readyCondition: 'True', kubeletVersion: kubelet }),
      }),
      exec,
      clock: f.clock,
      logger: silentLogger,
      metrics: f.deps.metrics,
    });
  }

  it('passes: the health phase runs between verify and commit, and its report is in the result', async () => {
    const f = await joinedFixture();
    f.deps.healthGate = gateFor(f, () => 0);
    const { outcome, phases, rec } = await switchToKube2(f);
    expect(outcome.state).toBe('succeeded');
    expect(phases).toMatchObject({ verify: 'succeeded', health: 'succeeded', commit: 'succeeded' });
    const names = rec.op.phases.map((p) => p.name);
    expect(names.indexOf('health')).toBe(names.indexOf('verify') + 1);
    expect(f.log.calls).toContain('exec kube2 /bin/app-ready');
    expect(f.log.calls.indexOf('exec kube2 /bin/app-ready')).toBeGreaterThan(
      f.log.calls.indexOf('verify kube2'),
    );
    expect(outcome.result.healthGate).toMatchObject({
      checks: [
        { name: 'node-ready', ok: true },
        { name: 'app', ok: true },
      ],
    });
  });

  it('a gate without a policy (no fleet policy) skips the phase', async () => {
    const f = await joinedFixture();
    f.deps.healthGate = gateFor(f, () => 1, 'v1.35.0', false);
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('succeeded');
    expect(phases.health).toBe('skipped');
    expect(f.log.calls.some((c) => c.startsWith('exec'))).toBe(false);
  });

  it.each([
    ['a failing check', () => 1, 'v1.35.0', ['app']],
    ['a Node with another kubelet version', () => 0, 'v1.34.0', ['node-ready']],
  ])(
    'fails on %s → rolled_back with HEALTH_GATE_FAILED, like a failed verify',
    async (_what, exit, kubelet, failedNames) => {
      const f = await joinedFixture();
      f.deps.healthGate = gateFor(f, exit, kubelet);
      let diagnosed: string | null = null;
      f.deps.diagnostics = (m) => {
        diagnosed = m;
        return Promise.resolve([]);
      };
      const { outcome, phases } = await switchToKube2(f);
      expect(outcome.state).toBe('rolled_back');
      const err = outcome.error as AgentError;
      expect(err.code).toBe('HEALTH_GATE_FAILED');
      expect((err.data.failed as Array<{ name: string }>).map((c) => c.name)).toEqual(failedNames);
      expect(err.data.diagnostics).toEqual([]);
      expect(diagnosed).toBe('kube2');
      expect(phases).toMatchObject({
        verify: 'succeeded',
        health: 'failed',
        commit: 'skipped',
        rollback: 'succeeded',
      });
      const afterGate = f.log.calls.filter((c) => !c.startsWith('exec'));
      expect(afterGate.slice(afterGate.indexOf('verify kube2') + 1)).toEqual([
        'stop kube2',
        'start kube1',
        'startServices kube1',
        'verify kube1',
        'remove kube2',
        'removeMachineFiles kube2',
        'daemonReload',
      ]);
      expect(f.machines.running).toEqual(new Set(['kube1']));
      expect(await f.applied.read('kube2')).toBeNull();
      expect((await f.applied.read('kube1'))?.config.Cluster.Version).toBe('1.34.0');
    },
  );

  it('a join whose gate fails removes the target and fails (there is no source to go back to)', async () => {
    const f = await createEngineFixture();
    f.deps.healthGate = gateFor(f, () => 1, 'v1.34.0');
    const rec = f.recorder(UPDATE_PHASES);
    const outcome = await runUpdate(
      f.deps,
      rec,
      { source: null, target: 'kube1', config: OLD, drain: false },
      new AbortController().signal,
    );
    expect(outcome.state).toBe('failed');
    expect((outcome.error as AgentError).code).toBe('HEALTH_GATE_FAILED');
    expect(await f.applied.read('kube1')).toBeNull();
    // The join started kube1 itself: it is stopped and removed, not kept as "never started".
    expect(f.log.calls).toEqual(expect.arrayContaining(['stop kube1', 'remove kube1']));
    expect(f.machines.running.has('kube1')).toBe(false);
  });
});

describe('runUpdate: the standby order (docs/architecture.md, "Hot standby")', () => {
  async function standbyFixture(memAvailable: number | null = 16 * 1024 ** 3): Promise<EngineFixture> {
    const f = await joinedFixture();
    f.deps.switchOrder = 'standby';
    f.deps.memAvailable = async () => memAvailable;
    return f;
  }

  it('boots kube2 in standby before kube1 stops; the window moves only kubelet and containerd; kube1 is powered off in cleanup', async () => {
    const f = await standbyFixture();
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('succeeded');
    expect(f.log.calls).toEqual([
      'preflight',
      'provision kube2',
      'stage kube2',
      'setStandbyBoot kube2 true',
      'start kube2 (not enabled)',
      'stopServices kube1',
      'setStandbyBoot kube2 false',
      'startServices kube2',
      'verify kube2',
      'disable kube1',
      'enable kube2',
      'stop kube1',
      'remove kube1',
      'removeMachineFiles kube1',
      'daemonReload',
    ]);
    expect(phases).toMatchObject({ standby: 'succeeded', stop: 'succeeded', start: 'succeeded' });
    expect(outcome.result).toMatchObject({ switchOrder: 'standby', downWindowMs: 0 });
    expect(await readJournal(f.stateDir)).toMatchObject({
      switchOrder: 'standby',
      sourcePoweredOff: true,
      committed: true,
      outcome: 'succeeded',
    });
    expect(f.machines.running).toEqual(new Set(['kube2']));
  });

  it.each([
    ['too little', 64 * 1024 ** 2, /standby needs 256 MiB of available memory .* and 64 MiB is available/],
    ['unreadable', null, /its available memory could not be read/],
  ])('%s memory: INSUFFICIENT_MEMORY as a warning, and the cold order', async (_what, mem, message) => {
    const f = await standbyFixture(mem);
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('succeeded');
    expect(phases.standby).toBe('skipped');
    expect(f.log.calls.slice(3, 6)).toEqual(['stop kube1', 'start kube2', 'startServices kube2']);
    expect(outcome.result).toMatchObject({
      switchOrder: 'cold',
      standby: { skipped: expect.stringMatching(message), code: 'INSUFFICIENT_MEMORY' },
    });
    expect((outcome.result.warnings as string[])[0]).toMatch(message);
  });

  it('a standby boot that fails changes nothing for kube1: kube2 is stopped and removed, the update fails', async () => {
    const f = await standbyFixture();
    f.log.fail('start kube2 (not enabled)');
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('failed');
    expect((outcome.error as AgentError).code).toBe('MACHINE_START_FAILED');
    expect(phases).toMatchObject({ standby: 'failed', stop: 'skipped' });
    expect(f.log.calls.slice(f.log.calls.indexOf('start kube2 (not enabled)') + 1)).toEqual(REMOVE_KUBE2);
    expect(f.log.calls).not.toContain('stopServices kube1');
    expect(f.machines.running).toEqual(new Set(['kube1']));
  });

  it.each([
    ['start', 'startServices kube2', 'MACHINE_START_FAILED'],
    ['verify', 'verify kube2', 'VERIFY_FAILED'],
  ])(
    '%s fails (%s) → rolled_back with %s without a boot: services move back, then kube2 is powered off and removed',
    async (phase, call, code) => {
      const f = await standbyFixture();
      f.log.fail(call);
      const { outcome, phases } = await switchToKube2(f);
      expect(outcome.state).toBe('rolled_back');
      expect((outcome.error as AgentError).code).toBe(code);
      expect(phases).toMatchObject({ [phase]: 'failed', rollback: 'succeeded' });
      expect(f.log.calls.slice(f.log.calls.indexOf(call) + 1)).toEqual([
        'stopServices kube2',
        'startServices kube1',
        'verify kube1',
        'stop kube2',
        ...REMOVE_KUBE2.slice(1),
      ]);
      expect(f.machines.running).toEqual(new Set(['kube1']));
    },
  );

  it('a failed commit rolls back and puts kube1 back in machines.target', async () => {
    const f = await standbyFixture();
    f.log.fail('enable kube2');
    const { outcome } = await switchToKube2(f);
    expect(outcome.state).toBe('rolled_back');
    expect(f.log.calls.slice(f.log.calls.indexOf('enable kube2') + 1, -4)).toEqual([
      'stopServices kube2',
      'enable kube1',
      'startServices kube1',
      'verify kube1',
    ]);
  });

  it('a source that does not run: nothing to stand beside, the cold order without a warning', async () => {
    const f = await standbyFixture();
    f.machines.running.delete('kube1');
    const { outcome, phases } = await switchToKube2(f);
    expect(outcome.state).toBe('succeeded');
    expect(phases.standby).toBe('skipped');
    expect(outcome.result).toMatchObject({
      switchOrder: 'cold',
      standby: { skipped: 'kube1 does not run: there is nothing to stand beside' },
    });
    expect(outcome.result.warnings).toBeUndefined();
  });

  it('a join boots its only machine the cold way: there is nothing to stand beside', async () => {
    const f = await createEngineFixture();
    f.deps.switchOrder = 'standby';
    f.deps.memAvailable = async () => 16 * 1024 ** 3;
    const rec = f.recorder(UPDATE_PHASES);
    const outcome = await runUpdate(
      f.deps,
      rec,
      { source: null, target: 'kube1', config: OLD, drain: false },
      new AbortController().signal,
    );
    expect(outcome).toMatchObject({ state: 'succeeded', result: { switchOrder: 'cold' } });
    expect(f.log.calls).toContain('start kube1');
  });
});
