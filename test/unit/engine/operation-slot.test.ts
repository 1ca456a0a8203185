/**
 * The operation slot on its own: an operation whose first record cannot be written never holds
 * the slot, and shutdown (`drain`) admits nothing new and reports what it could not wait for.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EventBus } from '../../../src/engine/events.js';
import { OperationSlot, type OperationBody } from '../../../src/engine/operation-slot.js';
import { OperationStore } from '../../../src/engine/operation-store.js';
import type { UpdateOutcome } from '../../../src/engine/update.js';
import { NoSpaceError } from '../../../src/errors.js';
import { stateWriteError } from '../../../src/host/fs-atomic.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { createManualClock, settle, type ManualClock } from '../../support/manual-clock.js';
import { silentLogger } from './fakes.js';

let stateDir: string;
beforeEach(async () => {
  stateDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-slot-'));
});
afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

function createSlot(store: OperationStore, clock: ManualClock = createManualClock()): OperationSlot {
  return new OperationSlot({
    store,
    events: new EventBus(),
    metrics: createMetrics({ version: 'test' }),
    logger: silentLogger,
    clock,
  });
}

/** A body that runs until `finish` is called. */
function heldBody(): { body: OperationBody; finish: () => void } {
  let finish!: () => void;
  const ended = new Promise<void>((resolve) => (finish = resolve));
  const body: OperationBody = async (rec) => {
    await rec.start();
    await ended;
    return { state: 'succeeded', result: {} } satisfies UpdateOutcome;
  };
  return { body, finish };
}

/** Admit and launch one update with `body`; resolves to its first snapshot. */
function start(slot: OperationSlot, body: OperationBody) {
  return slot.admit(() =>
    slot.launch(slot.create('update', { requestedBy: 'test' }, 'kube1', 'kube2', ['stop']), body),
  );
}

describe('OperationSlot.launch', () => {
  it('a first record that cannot be written: a clear error naming the file, and the slot is free again', async () => {
    const store = new OperationStore(stateDir);
    const slot = createSlot(store);
    // Where the history directory should be there is a file: nothing can be written under it.
    await writeFile(path.join(stateDir, 'operations'), 'in the way');
    const failed = start(slot, heldBody().body);
    await expect(failed).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
      message: expect.stringMatching(
        new RegExp(
          `^cannot start the update: cannot write ${path.join(stateDir, 'operations')}/op-[^ ]+\\.json: `,
        ),
      ),
      data: { file: expect.stringContaining(path.join(stateDir, 'operations')), errno: 'EEXIST' },
    });
    // Nothing runs, and the operation that never started is not in the history.
    expect(slot.current).toBeNull();
    expect(store.list()).toEqual([]);
    // The next request is not BUSY: it fails for the same reason, and once the directory can be
    // written, an operation starts.
    await expect(start(slot, heldBody().body)).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
    await rm(path.join(stateDir, 'operations'));
    const { body, finish } = heldBody();
    const op = await start(slot, body);
    expect(slot.current?.id).toBe(op.id);
    finish();
    expect((await slot.wait(op.id, undefined)).state).toBe('succeeded');
  });

  it('answers once the body has started the operation (an update: its journal on disk), running', async () => {
    const slot = createSlot(new OperationStore(stateDir));
    let openJournal!: () => void;
    const journalWritten = new Promise<void>((resolve) => (openJournal = resolve));
    const { body: held, finish } = heldBody();
    let answered = false;
    let entered!: () => void;
    const bodyEntered = new Promise<void>((resolve) => (entered = resolve));
    const answer = start(slot, async (rec, signal, hooks) => {
      entered(); // its first record is written: the launch has done all else
      await journalWritten; // what an update writes before it starts
      return held(rec, signal, hooks);
    }).then((op) => {
      answered = true;
      return op;
    });
    await bodyEntered;
    await settle();
    expect(answered, 'no answer before the operation has started').toBe(false);
    openJournal();
    const op = await answer;
    expect(op).toMatchObject({ state: 'running', startedAt: expect.any(String) });
    finish();
    expect((await slot.wait(op.id, undefined)).state).toBe('succeeded');
  });

  it('a body that ends before it starts the operation: answered with its end', async () => {
    const slot = createSlot(new OperationStore(stateDir));
    const op = await start(slot, () => Promise.reject(new Error('the journal cannot be written')));
    expect(op.state).toBe('failed');
    expect(op.error?.message).toContain('the journal cannot be written');
    expect(slot.current).toBeNull();
  });

  it('a directory that cannot be written is named as such (stateWriteError)', () => {
    const file = path.join(stateDir, 'operations', 'op-1.json');
    for (const code of ['EACCES', 'EPERM', 'EROFS']) {
      const err = Object.assign(new Error(`${code}: refused, open '${file}.123'`), { code });
      expect(stateWriteError(err, file)).toMatchObject({
        code: 'PRECONDITION_FAILED',
        message: `cannot write ${file}: ${path.dirname(file)} is not writable (${code}: refused, open '${file}.123')`,
        data: { file, errno: code },
      });
    }
    const full = new NoSpaceError('write x: no space left on device');
    expect(stateWriteError(full, file)).toBe(full);
  });
});

describe('OperationSlot.drain', () => {
  it('waits for an admission under way, which then launches nothing (DRAINING); later requests get DRAINING', async () => {
    const slot = createSlot(new OperationStore(stateDir));
    let admitted!: () => void;
    const reached = new Promise<void>((resolve) => (admitted = resolve));
    let proceed!: () => void;
    const held = new Promise<void>((resolve) => (proceed = resolve));
    // An update being admitted: it reads the node (held here), then launches.
    const admission = slot.admit(async () => {
      admitted();
      await held;
      return slot.launch(
        slot.create('update', { requestedBy: 'test' }, 'kube1', 'kube2', ['stop']),
        heldBody().body,
      );
    });
    await reached;
    let drained: unknown = 'not yet';
    const draining = slot.drain(10_000).then((left) => (drained = left));
    await settle();
    expect(drained, 'drain waits for the admission').toBe('not yet');
    proceed();
    await expect(admission).rejects.toMatchObject({ code: 'DRAINING' });
    await draining;
    expect(drained).toBeNull();
    expect(slot.current).toBeNull();
    await expect(start(slot, heldBody().body)).rejects.toMatchObject({ code: 'DRAINING' });
    await expect(slot.exclusive(async () => 'bookkeeping')).rejects.toMatchObject({ code: 'DRAINING' });
  });

  it('an operation past its point of no return that outlasts the grace: reported with its running phase', async () => {
    const clock = createManualClock();
    const slot = createSlot(new OperationStore(stateDir), clock);
    let finish!: () => void;
    const ended = new Promise<void>((resolve) => (finish = resolve));
    let inStop!: () => void;
    const stopping = new Promise<void>((resolve) => (inStop = resolve));
    const op = await start(slot, async (rec, _signal, hooks) => {
      await rec.start();
      await rec.phaseStarted('stop');
      hooks.onPointOfNoReturn();
      inStop();
      await ended;
      return { state: 'succeeded', result: {} };
    });
    await stopping;
    const draining = slot.drain(1000);
    await clock.advance(1000);
    const left = await draining;
    expect(left?.operation).toMatchObject({ id: op.id, state: 'running' });
    expect(left?.operation?.phases).toEqual([expect.objectContaining({ name: 'stop', state: 'running' })]);
    finish();
    expect((await slot.wait(op.id, undefined)).state).toBe('succeeded');
  });

  it('an operation that ends within the grace: nothing in flight', async () => {
    const clock = createManualClock();
    const slot = createSlot(new OperationStore(stateDir), clock);
    const { body, finish } = heldBody();
    const op = await start(slot, body);
    const draining = slot.drain(1000);
    // Cancellable: shutdown cancels it, and this body ends at its next step.
    finish();
    expect(await draining).toBeNull();
    expect(slot.get(op.id).state).toBe('succeeded');
  });
});

describe('OperationSlot.cancel', () => {
  it('a kind that is never cancellable (reset) says so, not that it passed a point of no return', async () => {
    const slot = createSlot(new OperationStore(stateDir));
    const held = heldBody();
    const op = await slot.admit(() =>
      slot.launch(
        slot.create('reset', { requestedBy: 'test' }, 'kube1', 'kube1', ['stop']),
        held.body,
        false,
      ),
    );
    expect(() => slot.cancel(op.id)).toThrow(
      `operation ${op.id} (reset) cannot be cancelled: a reset runs to its end; follow it with agentctl ops wait ${op.id}`,
    );
    held.finish();
    expect((await slot.wait(op.id, undefined)).state).toBe('succeeded');
  });
});
