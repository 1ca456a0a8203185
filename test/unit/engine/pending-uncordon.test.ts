/**
 * The pending-uncordon protocol on its own (src/engine/pending-uncordon.ts): the flag read from
 * the closed journal, the uncordon once Kubernetes is available (under the slot, shared by
 * concurrent callers), the flag cleared in the journal only when done, and the `status` warning.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readJournal, writeJournal } from '../../../src/engine/journal.js';
import { PendingUncordon } from '../../../src/engine/pending-uncordon.js';
import type { NodeDrainer } from '../../../src/engine/update.js';
import { createFakeClock } from '../host/fake-clock.js';
import { makeJournal, silentLogger } from './fakes.js';

let dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  dirs = [];
});

async function setup(journal: Parameters<typeof makeJournal>[0] | null) {
  const stateDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-pending-'));
  dirs.push(stateDir);
  if (journal) await writeJournal(stateDir, makeJournal(journal));
  const kube = { available: true, uncordons: 0, fail: false, exclusive: 0, refreshes: 0, changes: 0 };
  /** When set, `exclusive` waits for it (an operation holds the slot). */
  let slotBusy: Promise<void> | null = null;
  const drainer: NodeDrainer = {
    drain: () => Promise.reject(new Error('not in this test')),
    uncordon: async () => {
      if (kube.fail) throw new Error('connection refused');
      kube.uncordons += 1;
    },
  };
  const pending = new PendingUncordon({
    stateDir,
    clock: createFakeClock(),
    logger: silentLogger,
    drainer: () => (kube.available ? drainer : null),
    unavailableReason: () => 'the Kubernetes client is still loading',
    exclusive: async (fn) => {
      kube.exclusive += 1;
      if (slotBusy) await slotBusy;
      return fn();
    },
    refresh: async () => void (kube.refreshes += 1),
    onChange: () => void (kube.changes += 1),
  });
  return {
    stateDir,
    kube,
    pending,
    /** Hold the slot until the returned function is called. */
    holdSlot: (): (() => void) => {
      let free!: () => void;
      slotBusy = new Promise<void>((r) => (free = r));
      return free;
    },
  };
}

const CLOSED_PENDING = {
  operationId: 'op-7',
  closed: true,
  uncordonPending: true,
  outcome: 'interrupted: rolled back',
};

describe('PendingUncordon', () => {
  it('reads the flag from a closed journal only; an open one, or none, leaves nothing pending', async () => {
    const t = await setup(CLOSED_PENDING);
    t.pending.load(await readJournal(t.stateDir));
    expect(t.pending.id).toBe('op-7');
    expect(t.kube.changes).toBe(1);
    const open = await setup({ operationId: 'op-8', closed: false, uncordonPending: true });
    open.pending.load(await readJournal(open.stateDir));
    expect(open.pending.id).toBeNull();
    const none = await setup(null);
    none.pending.load(await readJournal(none.stateDir));
    expect(none.pending.id).toBeNull();
    expect(await none.pending.complete()).toBe('none');
    expect(none.pending.warning()).toBeNull();
  });

  it('uncordons under the slot, clears the journal flag and the warning, and reads the node again', async () => {
    const t = await setup(CLOSED_PENDING);
    t.pending.load(await readJournal(t.stateDir));
    expect(t.pending.warning()).toEqual({
      code: 'pending-uncordon',
      operationId: 'op-7',
      message: 'the node is still cordoned by interrupted operation op-7: run agentctl uncordon',
    });
    expect(await t.pending.complete()).toBe('uncordoned');
    expect(t.kube).toMatchObject({ uncordons: 1, exclusive: 1, refreshes: 1 });
    expect(t.pending.id).toBeNull();
    expect(t.pending.warning()).toBeNull();
    expect(await readJournal(t.stateDir)).toMatchObject({
      operationId: 'op-7',
      closed: true,
      uncordonPending: false,
    });
    expect(await t.pending.complete()).toBe('none');
    expect(t.kube.uncordons).toBe(1);
  });

  it('Kubernetes not available, or the uncordon fails: the flag and the warning stay', async () => {
    const t = await setup(CLOSED_PENDING);
    t.pending.load(await readJournal(t.stateDir));
    t.kube.available = false;
    expect(await t.pending.complete()).toBe('unavailable');
    expect(t.kube.exclusive).toBe(0);
    t.kube.available = true;
    t.kube.fail = true;
    expect(await t.pending.complete()).toBe('failed');
    expect(t.pending.id).toBe('op-7');
    expect(t.pending.warning()?.code).toBe('pending-uncordon');
    expect(await readJournal(t.stateDir)).toMatchObject({ uncordonPending: true });
  });

  it('waits for the slot; concurrent callers share that one try', async () => {
    const t = await setup(CLOSED_PENDING);
    t.pending.load(await readJournal(t.stateDir));
    const free = t.holdSlot();
    const a = t.pending.complete();
    const b = t.pending.complete();
    expect(b).toBe(a);
    await new Promise((r) => setImmediate(r));
    expect(t.kube.uncordons).toBe(0);
    free();
    expect(await Promise.all([a, b])).toEqual(['uncordoned', 'uncordoned']);
    expect(t.kube.uncordons).toBe(1);
    expect(t.kube.exclusive).toBe(1);
  });

  it('an operator who uncordoned while it waited for the slot: nothing more is done', async () => {
    const t = await setup(CLOSED_PENDING);
    t.pending.load(await readJournal(t.stateDir));
    const free = t.holdSlot();
    const waiting = t.pending.complete();
    await t.pending.clear();
    free();
    expect(await waiting).toBe('none');
    expect(t.kube.uncordons).toBe(0);
  });

  it("an operator's uncordon clears it: the journal flag goes, a later try does nothing", async () => {
    const t = await setup(CLOSED_PENDING);
    t.pending.load(await readJournal(t.stateDir));
    await t.pending.clear();
    expect(t.pending.id).toBeNull();
    expect(await readJournal(t.stateDir)).toMatchObject({ uncordonPending: false });
    expect(await t.pending.complete()).toBe('none');
    expect(t.kube.uncordons).toBe(0);
  });
});
