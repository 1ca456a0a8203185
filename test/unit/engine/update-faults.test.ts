/**
 * Issue 40 in the update procedure: a record that cannot be written never stops the rollback
 * that brings the node back, every failed ending says which machine serves, and a target this
 * update never started (node.json naming the wrong machine) is never stopped or removed. Also the
 * reserve and the owed writes on their own.
 */
import { stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DeferredWrites } from '../../../src/engine/deferred-writes.js';
import { LATE_RECORD_WARNING } from '../../../src/engine/operation-recorder.js';
import { OperationStore } from '../../../src/engine/operation-store.js';
import { StateReserve, exhaustion } from '../../../src/engine/reserve.js';
import { UPDATE_PHASES, runUpdate } from '../../../src/engine/update.js';
import { AgentError, NoSpaceError } from '../../../src/errors.js';
import { OperationRecorder } from '../../../src/engine/operation-recorder.js';
import { configAt, createEngineFixture, silentLogger, type EngineFixture } from './fakes.js';

const NEW = configAt('1.35.0');

function enospc(): Error {
  return Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
}

/** The fixture's recorder on a store whose writes fail once `full.on` is set (owed instead). */
function fullingRecorder(f: EngineFixture, deferred: DeferredWrites) {
  const full = { on: false };
  const store = new OperationStore(f.stateDir, { deferred });
  const save = store.save.bind(store);
  store.save = async (op) => {
    if (full.on) {
      // What a full disk does to a history write (the in-memory history keeps it).
      await save(op).catch(() => undefined);
      throw new NoSpaceError(`write ${f.stateDir}/operations/${op.id}.json: no space left on device`);
    }
    return save(op);
  };
  const rec = f.recorder(UPDATE_PHASES);
  const recorder = new OperationRecorder(rec.op, {
    store,
    events: f.events,
    metrics: f.metrics,
    logger: silentLogger,
    clock: f.clock,
  });
  return { full, store, rec: recorder };
}

describe('runUpdate when the history cannot be written', () => {
  it('the rollback still brings kube1 back; the end says so and is owed, not lost', async () => {
    const f = await createEngineFixture();
    await f.machines.start('kube1');
    await f.machines.startServices('kube1');
    f.log.calls.length = 0;
    const deferred = new DeferredWrites();
    const { full, store, rec } = fullingRecorder(f, deferred);
    f.log.fail('verify kube2');
    const verify = f.log.hold('verify kube2');
    const running = runUpdate(
      { ...f.deps, deferred },
      rec,
      { source: 'kube1', target: 'kube2', config: NEW, drain: false },
      new AbortController().signal,
    );
    await verify.reached;
    full.on = true; // the disk fills during verify
    verify.release();
    const outcome = await running;
    expect(outcome.state).toBe('rolled_back');
    expect(f.log.calls).toEqual(
      expect.arrayContaining([
        'stop kube2',
        'start kube1',
        'startServices kube1',
        'verify kube1',
        'remove kube2',
      ]),
    );
    expect(f.machines.running).toEqual(new Set(['kube1']));
    // The ending says which machine serves, not only which file could not be written.
    expect((outcome.error as AgentError).message).toContain('the node: kube1 serves');
    expect((outcome.error as AgentError).data.node).toEqual({ kube1: 'serving', kube2: 'stopped' });
    await rec.finish(outcome.state, outcome.result, outcome.error);
    expect(rec.op.result?.warnings).toContain(LATE_RECORD_WARNING);
    expect(rec.op.phases.filter((p) => p.state === 'running' || p.state === 'pending')).toEqual([]);
    expect(deferred.warnings()).toEqual([
      {
        code: 'deferred-writes',
        write: `operation:${rec.op.id}`,
        since: expect.any(String),
        message: expect.stringContaining(`the record of operation ${rec.op.id}`),
      },
    ]);
    // Space returns: the owed record is written with the true end.
    full.on = false;
    expect(await deferred.flush()).toBe(0);
    const reread = new OperationStore(f.stateDir);
    await reread.load();
    expect(reread.get(rec.op.id)).toMatchObject({ state: 'rolled_back' });
    expect(store.get(rec.op.id)?.state).toBe('rolled_back');
  });
});

describe('OperationRecorder.finish', () => {
  it('an ended operation shows no phase still running or pending (issue 40)', async () => {
    const f = await createEngineFixture();
    const rec = f.recorder(['provision', 'stage', 'commit']);
    await rec.start();
    await rec.phaseStarted('provision');
    // The body ended without ending its phase (an unexpected throw).
    await rec.finish('failed', {}, new NoSpaceError('write x: no space left on device'));
    expect(rec.op.phases.map((p) => [p.name, p.state, p.error?.code ?? null])).toEqual([
      ['provision', 'failed', 'NO_SPACE'],
      ['stage', 'skipped', null],
      ['commit', 'skipped', null],
    ]);
    expect(f.store.get(rec.op.id)?.phases.filter((p) => p.state === 'running')).toEqual([]);
  });
});

describe('runUpdate on a node.json that names the wrong machine (issue 40)', () => {
  it('a failed update never stops or removes a target it did not start: kube2 serves on', async () => {
    const f = await createEngineFixture();
    // node.json says kube1 (the plan's source), but kube2 is the machine that runs and serves.
    await f.machines.start('kube2');
    await f.machines.startServices('kube2');
    f.log.calls.length = 0;
    const rec = f.recorder(UPDATE_PHASES);
    const outcome = await runUpdate(
      f.deps,
      rec,
      { source: 'kube1', target: 'kube2', config: NEW, drain: false },
      new AbortController().signal,
    );
    expect(outcome.state).toBe('failed');
    expect(f.log.calls).not.toContain('stop kube2');
    expect(f.log.calls).not.toContain('remove kube2');
    expect(f.machines.running).toEqual(new Set(['kube2']));
    expect(outcome.result.undo).toEqual([
      {
        step: 'remove kube2',
        ok: false,
        error: 'refused: kube2 runs and serves the node, and this operation never started it',
      },
    ]);
    expect((outcome.error as AgentError).message).toContain('the node: kube2 serves');
  });
});

describe('StateReserve', () => {
  it('holds a file of its size and descriptors; a step that fails for want of either gets them once', async () => {
    const f = await createEngineFixture();
    const reserve = new StateReserve(f.dir, { bytes: 256 * 1024, descriptors: 4 });
    await reserve.ensure();
    expect(reserve.state).toEqual({ bytes: 256 * 1024, descriptors: 4 });
    expect((await stat(reserve.file)).size).toBe(256 * 1024);
    let calls = 0;
    const out = await reserve.retry(async () => {
      if (++calls === 1) throw enospc();
      return 'written';
    });
    expect(out).toBe('written');
    expect(reserve.released).toEqual({ space: 1, descriptors: 0 });
    // Taken back at once after the step.
    expect(reserve.whole).toBe(true);
    calls = 0;
    await reserve.retry(async () => {
      if (++calls === 1) throw Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
    });
    expect(reserve.released).toEqual({ space: 1, descriptors: 1 });
    // Other failures are not retried.
    calls = 0;
    await expect(
      reserve.retry(async () => {
        calls++;
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(calls).toBe(1);
    await reserve.close();
  });

  it('says which failures are exhaustion, through causes, AgentError data and host messages', () => {
    expect(exhaustion(enospc())).toBe('space');
    expect(exhaustion(new NoSpaceError('write x: no space left on device'))).toBe('space');
    expect(exhaustion(new AgentError('COMMAND_FAILED', 'machinectl start kube1', { cause: enospc() }))).toBe(
      'space',
    );
    expect(exhaustion(new AgentError('INTERNAL', 'x', { data: { errno: 'EMFILE' } }))).toBe('descriptors');
    expect(exhaustion(new Error('spawn failed: Too many open files'))).toBe('descriptors');
    expect(exhaustion(new Error('kubelet not healthy'))).toBeNull();
  });
});

describe('DeferredWrites', () => {
  it('keeps the newest write of a file, says what is owed, and writes it once it can', async () => {
    const f = await createEngineFixture();
    const deferred = new DeferredWrites({ now: () => '2026-01-01T00:00:00.000Z' });
    const file = path.join(f.dir, 'x.json');
    let fail = true;
    const write = (text: string) => async () => {
      if (fail) throw enospc();
      await writeFile(file, text);
    };
    deferred.defer('x', 'the file x', write('old'), enospc());
    deferred.defer('x', 'the file x', write('new'), enospc());
    expect(deferred.warnings()).toEqual([
      {
        code: 'deferred-writes',
        write: 'x',
        since: '2026-01-01T00:00:00.000Z',
        message:
          'the file x is not written yet (since 2026-01-01T00:00:00.000Z: ENOSPC: no space left on device, write); agentd writes it once space or descriptors return',
      },
    ]);
    expect(await deferred.flush()).toBe(1);
    fail = false;
    expect(await deferred.flush()).toBe(0);
    expect(deferred.written).toBe(1);
    expect(deferred.warnings()).toEqual([]);
    const { readFile } = await import('node:fs/promises');
    expect(await readFile(file, 'utf8')).toBe('new');
  });
});
