/**
 * Startup recovery with fakes: the journal alone decides (uncommitted → back to the source,
 * committed → forward to the target, reset → finish it), and the interrupted operation and
 * the journal record what was done.
 */
import { describe, expect, it } from 'vitest';
import { readJournal, writeJournal, type Journal } from '../../../src/engine/journal.js';
import { readNodeState, writeNodeState } from '../../../src/engine/node-state.js';
import { recover, type RecoveryDeps } from '../../../src/engine/recovery.js';
import type { Operation } from '../../../src/engine/operation.js';
import { configAt, createEngineFixture, makeJournal, silentLogger, type EngineFixture } from './fakes.js';

function deps(f: EngineFixture, extra: Partial<RecoveryDeps> = {}): RecoveryDeps {
  return { ...f.deps, store: f.store, logger: silentLogger, ...extra };
}

/** An interrupted operation in the history and its open journal. */
async function interrupted(f: EngineFixture, journal: Partial<Journal>): Promise<Operation> {
  const rec = f.recorder(['preflight', 'provision', 'stop', 'start', 'verify', 'commit', 'cleanup']);
  await rec.start();
  await rec.phaseEnded('preflight', 'succeeded');
  await rec.phaseEnded('provision', 'succeeded');
  await rec.phaseStarted(journal.phase ?? 'stop');
  await writeJournal(
    f.stateDir,
    makeJournal({ operationId: rec.op.id, updatedAt: new Date(f.clock.now()).toISOString(), ...journal }),
  );
  return rec.op;
}

describe('recover', () => {
  it('no journal and a plain node: nothing to do', async () => {
    const f = await createEngineFixture();
    await f.applied.write('kube1', configAt('1.34.0'));
    expect((await recover(deps(f))).report).toBeNull();
    expect(f.log.calls).toEqual([]);
  });

  it('a closed journal: nothing to do', async () => {
    const f = await createEngineFixture();
    await interrupted(f, { closed: true, outcome: 'succeeded' });
    await writeNodeState(f.stateDir, 'kube1', new Date(f.clock.now()));
    expect((await recover(deps(f))).report).toBeNull();
    expect(f.log.calls).toEqual([]);
  });

  it('a closed journal whose operation was never saved as ended: the record is closed, the host untouched', async () => {
    const f = await createEngineFixture();
    const op = await interrupted(f, { closed: true, outcome: 'succeeded' });
    await writeNodeState(f.stateDir, 'kube2', new Date(f.clock.now()));
    await recover(deps(f));
    expect(f.log.calls).toEqual([]);
    // The journal has its true end (issue 40: not `interrupted`), and no phase is left running.
    const saved = f.store.get(op.id);
    expect(saved).toMatchObject({
      state: 'succeeded',
      result: {
        recovery: {
          interruptedIn: 'stop',
          activeMachine: 'kube2',
          actions: [],
          outcome:
            'recorded its end (succeeded) from the journal: agentd stopped before the record was written',
        },
      },
    });
    expect(saved?.phases.filter((p) => p.state === 'running' || p.state === 'pending')).toEqual([]);
  });

  it('operations that keep no journal (repair, drain) left running are closed as interrupted', async () => {
    const f = await createEngineFixture();
    await writeNodeState(f.stateDir, 'kube1', new Date(f.clock.now()));
    const repair = f.recorder(['start', 'verify'], 'repair');
    await repair.start();
    await repair.phaseStarted('start');
    const drain = f.recorder(['cordon', 'evict'], 'drain');
    await drain.start();
    await drain.phaseStarted('cordon');
    await drain.phaseEnded('cordon', 'succeeded');
    await drain.phaseStarted('evict');

    expect((await recover(deps(f))).report).toBeNull();
    expect(f.log.calls).toEqual([]);
    const r = f.store.get(repair.op.id);
    expect(r).toMatchObject({ state: 'interrupted', error: null, finishedAt: expect.any(String) });
    expect(r?.phases.map((p) => [p.name, p.state, p.error?.code ?? null])).toEqual([
      ['start', 'failed', 'CANCELLED'],
      ['verify', 'skipped', null],
    ]);
    expect(r?.result).toMatchObject({
      recovery: {
        interruptedIn: 'start',
        activeMachine: 'kube1',
        outcome: expect.stringMatching(/repairs it/),
      },
    });
    expect(f.store.get(drain.op.id)).toMatchObject({
      state: 'interrupted',
      result: { recovery: { interruptedIn: 'evict', outcome: expect.stringMatching(/agentctl uncordon/) } },
    });
    // Ended operations are left alone.
    const before = structuredClone(f.store.list());
    await recover(deps(f));
    expect(f.store.list()).toEqual(before);
  });

  it('uncommitted: the target is removed and the source brought back; the operation is interrupted', async () => {
    const f = await createEngineFixture();
    await f.applied.write('kube1', configAt('1.34.0'));
    await f.applied.write('kube2', configAt('1.35.0')); // as a crash in the middle of the commit leaves it
    f.machines.running.add('kube2');
    const op = await interrupted(f, { phase: 'verify' });

    const { report } = await recover(deps(f));
    expect(report).toMatchObject({
      operationId: op.id,
      outcome: 'rolled back to kube1',
      activeMachine: 'kube1',
      ok: true,
    });
    // kube2 stops first (two machines never run at once) and is removed only once kube1 is verified.
    expect(f.log.calls).toEqual([
      'stop kube2',
      'start kube1',
      'startServices kube1',
      'verify kube1',
      'stop kube2',
      'remove kube2',
      'removeMachineFiles kube2',
      'daemonReload',
    ]);
    expect(await f.applied.read('kube2')).toBeNull();
    expect((await readNodeState(f.stateDir))?.activeMachine).toBe('kube1');

    const saved = f.store.get(op.id)!;
    expect(saved.state).toBe('interrupted');
    expect(saved.error).toBeNull();
    expect(saved.result?.recovery).toMatchObject({ interruptedIn: 'verify', activeMachine: 'kube1' });
    const phases = Object.fromEntries(saved.phases.map((p) => [p.name, [p.state, p.error?.code ?? null]]));
    expect(phases).toMatchObject({
      provision: ['succeeded', null],
      verify: ['failed', 'CANCELLED'],
      commit: ['skipped', null],
    });
    expect(await readJournal(f.stateDir)).toMatchObject({
      operationId: op.id,
      closed: true,
      outcome: 'interrupted: rolled back to kube1',
    });
  });

  it('committed: forward to the target (already healthy: only verified), the source removed', async () => {
    const f = await createEngineFixture();
    await f.applied.write('kube1', configAt('1.34.0'));
    await f.applied.write('kube2', configAt('1.35.0'));
    f.machines.running.add('kube2');
    await f.machines.startServices('kube2'); // kubelet active
    f.log.calls.length = 0;
    await interrupted(f, { phase: 'cleanup', committed: true });

    const { report } = await recover(deps(f));
    expect(report).toMatchObject({
      outcome: 'completed the switch to kube2',
      activeMachine: 'kube2',
      ok: true,
    });
    expect(f.log.calls).toEqual([
      'verify kube2',
      'stop kube1',
      'remove kube1',
      'removeMachineFiles kube1',
      'daemonReload',
    ]);
    expect(await f.applied.read('kube1')).toBeNull();
    expect((await readNodeState(f.stateDir))?.activeMachine).toBe('kube2');
  });

  it('an interrupted join: the partial machine is removed, the node has none', async () => {
    const f = await createEngineFixture();
    await interrupted(f, { source: null, target: 'kube1', phase: 'provision', sourceStopped: false });
    const { report } = await recover(deps(f));
    expect(report).toMatchObject({ activeMachine: null, ok: true });
    expect(report?.outcome).toBe('removed the partial join; the node has no machine');
    expect(f.log.calls).toEqual(['stop kube1', 'remove kube1', 'removeMachineFiles kube1', 'daemonReload']);
    expect((await readNodeState(f.stateDir))?.activeMachine).toBeNull();
  });

  it('an interrupted reset is finished', async () => {
    const f = await createEngineFixture();
    await f.applied.write('kube1', configAt('1.34.0'));
    await interrupted(f, { kind: 'reset', target: null, phase: 'remove' });
    const { report } = await recover(deps(f));
    expect(report).toMatchObject({
      outcome: 'finished the reset: both machines removed',
      activeMachine: null,
      ok: true,
    });
    expect(f.log.calls).toEqual([
      'stop kube1',
      'remove kube1',
      'removeMachineFiles kube1',
      'stop kube2',
      'remove kube2',
      'removeMachineFiles kube2',
      'daemonReload',
    ]);
    expect(await f.applied.read('kube1')).toBeNull();
  });

  it('when the source does not come back: not ok, RECOVERY_FAILED recorded on the operation', async () => {
    const f = await createEngineFixture();
    await f.applied.write('kube1', configAt('1.34.0'));
    f.log.fail('start kube1', undefined, true);
    const op = await interrupted(f, { phase: 'start' });
    const { report } = await recover(deps(f));
    expect(report).toMatchObject({ ok: false, outcome: 'could not bring kube1 back' });
    expect(report?.actions).toContainEqual(expect.objectContaining({ step: 'start kube1', ok: false }));
    expect(f.store.get(op.id)?.error).toMatchObject({ code: 'RECOVERY_FAILED' });
    expect(await readJournal(f.stateDir)).toMatchObject({ closed: true });
  });

  it('uncordons a node the interrupted update cordoned', async () => {
    const f = await createEngineFixture();
    await f.applied.write('kube1', configAt('1.34.0'));
    await interrupted(f, { cordonedByUs: true });
    const drainer = {
      drain: async () => ({ cordonedByUs: false, result: {} }),
      uncordon: async () => void f.log.calls.push('uncordon'),
    };
    const { report } = await recover(deps(f, { drainer }));
    expect(report?.ok).toBe(true);
    expect(report?.uncordonPending).toBe(false);
    expect(report?.actions).toContainEqual({ step: 'uncordon', ok: true });
    expect(f.log.calls.at(-1)).toBe('uncordon');
    expect(await readJournal(f.stateDir)).toMatchObject({ closed: true, uncordonPending: false });
  });

  describe('an uncordon that cannot be done during recovery is deferred, never dropped', () => {
    it('no drainer yet (Kubernetes not loaded): pending in the journal, reported, not a failure', async () => {
      const f = await createEngineFixture();
      await f.applied.write('kube1', configAt('1.34.0'));
      const op = await interrupted(f, { cordonedByUs: true });
      const { report } = await recover(deps(f, { drainer: null }));
      expect(report).toMatchObject({ ok: true, outcome: 'rolled back to kube1', uncordonPending: true });
      expect(report?.actions.at(-1)).toMatchObject({ step: 'uncordon', ok: false, deferred: true });
      expect(report?.actions.at(-1)?.error).toMatch(/agentctl uncordon/);
      expect(await readJournal(f.stateDir)).toMatchObject({
        operationId: op.id,
        closed: true,
        cordonedByUs: true,
        uncordonPending: true,
      });
      const saved = f.store.get(op.id)!;
      expect(saved.state).toBe('interrupted');
      expect(saved.error).toBeNull();
      expect(saved.result?.recovery).toMatchObject({ uncordonPending: true });
    });

    it('an uncordon that fails: pending too, the recovery itself still ok', async () => {
      const f = await createEngineFixture();
      await f.applied.write('kube1', configAt('1.34.0'));
      await interrupted(f, { cordonedByUs: true });
      const drainer = {
        drain: async () => ({ cordonedByUs: false, result: {} }),
        uncordon: () => Promise.reject(new Error('connection refused')),
      };
      const { report } = await recover(deps(f, { drainer }));
      expect(report).toMatchObject({ ok: true, uncordonPending: true });
      expect(report?.actions.at(-1)).toEqual({
        step: 'uncordon',
        ok: false,
        deferred: true,
        error: 'connection refused',
      });
      expect(await readJournal(f.stateDir)).toMatchObject({ uncordonPending: true });
    });

    it('a pending uncordon carried into a later journal is done when that operation is recovered', async () => {
      const f = await createEngineFixture();
      await f.applied.write('kube1', configAt('1.34.0'));
      await interrupted(f, { cordonedByUs: false, uncordonPending: true });
      const drainer = {
        drain: async () => ({ cordonedByUs: false, result: {} }),
        uncordon: async () => void f.log.calls.push('uncordon'),
      };
      const { report } = await recover(deps(f, { drainer }));
      expect(report).toMatchObject({ ok: true, uncordonPending: false });
      expect(f.log.calls.at(-1)).toBe('uncordon');
      expect(await readJournal(f.stateDir)).toMatchObject({ closed: true, uncordonPending: false });
    });

    it('a node nobody cordoned: no uncordon step at all', async () => {
      const f = await createEngineFixture();
      await f.applied.write('kube1', configAt('1.34.0'));
      await interrupted(f, {});
      const { report } = await recover(deps(f, { drainer: null }));
      expect(report).toMatchObject({ ok: true, uncordonPending: false });
      expect(report?.actions.map((a) => a.step)).not.toContain('uncordon');
    });
  });

  describe('takeover (no journal, no node state: a node from the upstream agent)', () => {
    it('two applied configs: the one running machine with kubelet active is the active one', async () => {
      const f = await createEngineFixture();
      await f.applied.write('kube1', configAt('1.34.0'));
      await f.applied.write('kube2', configAt('1.35.0'));
      await f.machines.start('kube2');
      await f.machines.startServices('kube2');
      const { report } = await recover(deps(f));
      expect(report).toMatchObject({ activeMachine: 'kube2', ok: true, operationId: null });
      expect((await readNodeState(f.stateDir))?.activeMachine).toBe('kube2');
    });

    it('two applied configs and no single healthy machine: undecided, nothing written', async () => {
      const f = await createEngineFixture();
      await f.applied.write('kube1', configAt('1.34.0'));
      await f.applied.write('kube2', configAt('1.35.0'));
      expect((await recover(deps(f))).report).toBeNull();
      expect(await readNodeState(f.stateDir)).toBeUndefined();
    });
  });
});
