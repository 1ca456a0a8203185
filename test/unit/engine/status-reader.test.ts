/**
 * The status reader on its own (src/engine/status-reader.ts): the node read again once its facts
 * are older than the age allowed, on the injected clock; one read shared by every caller; none
 * while an operation runs; the old facts with a `stale-facts` warning when a read does not end in
 * time; and the answer put together from the snapshot and the engine's parts.
 */
import { describe, expect, it } from 'vitest';
import type { NodeStatus, Operation } from '../../../src/engine/operation.js';
import type { RepairStatus } from '../../../src/engine/repair.js';
import {
  STATUS_MAX_AGE_MS,
  STATUS_READ_WAIT_MS,
  StatusReader,
  type StatusReaderOptions,
} from '../../../src/engine/status-reader.js';
import { StatusVersion } from '../../../src/engine/status-version.js';
import type { StatusWarning } from '../../../src/engine/warnings.js';
import { createManualClock, settle, type ManualClock } from '../../support/manual-clock.js';

const REPAIR: RepairStatus = {
  state: 'idle',
  failures: 0,
  nextAttemptAt: null,
  lastError: null,
  lastOperation: null,
};

function op(id: string, state: Operation['state']): Operation {
  return {
    id,
    kind: 'update',
    state,
    reason: null,
    requestedBy: 'test',
    idempotencyKey: null,
    createdAt: '2026-01-01T00:00:00.000Z',
    startedAt: null,
    finishedAt: null,
    from: 'kube1',
    to: 'kube2',
    phases: [],
    result: null,
    error: null,
  };
}

/** A snapshot whose reads are counted, and held while `gate` is set. */
function fakeSnapshot(clock: ManualClock) {
  const snap = {
    reads: 0,
    gate: null as Promise<void> | null,
    node: {
      activeMachine: 'kube1',
      serving: true,
      servingReason: null,
      applied: null,
      machines: [],
      cordoned: null,
      warnings: [{ code: 'host', message: 'from the snapshot' }],
      repair: null,
      observedAt: null,
    } as NodeStatus,
    async refresh(): Promise<void> {
      snap.reads += 1;
      const observedAt = new Date(clock.now()).toISOString();
      if (snap.gate) await snap.gate;
      snap.node = { ...snap.node, observedAt };
    },
  };
  return snap;
}

function setup(extra: Partial<StatusReaderOptions> = {}) {
  const clock = createManualClock();
  const snapshot = fakeSnapshot(clock);
  const version = new StatusVersion();
  const state = {
    running: null as Operation | null,
    history: [] as Operation[],
    warnings: [] as StatusWarning[],
    cordoned: null as boolean | null,
    upkeep: 0,
  };
  const reader = new StatusReader({
    snapshot,
    clock,
    version,
    running: () => state.running,
    history: (limit) => state.history.slice(0, limit),
    beforeStatus: () => void (state.upkeep += 1),
    cordoned: () => state.cordoned,
    repair: () => REPAIR,
    warnings: () => state.warnings,
    ...extra,
  });
  return { clock, snapshot, version, state, reader };
}

describe('StatusReader: freshness', () => {
  it('answers from the snapshot while it is young; reads the node once it is older than the age allowed', async () => {
    const { clock, snapshot, reader } = setup();
    // Before the first read (startup recovery decides what the node is): no read.
    await reader.status();
    expect(snapshot.reads).toBe(0);
    await reader.refresh();
    expect(snapshot.reads).toBe(1);
    await clock.advance(STATUS_MAX_AGE_MS - 1);
    await reader.status();
    expect(snapshot.reads).toBe(1);
    await clock.advance(1);
    const s = await reader.status();
    expect(snapshot.reads).toBe(2);
    expect(s.node.observedAt).toBe(new Date(clock.now()).toISOString());
  });

  it('moves the status version on by itself once the facts are old', async () => {
    const { clock, version, reader } = setup({ maxAgeMs: 5000 });
    await reader.refresh();
    const v = version.value;
    await clock.advance(4999);
    expect(version.value).toBe(v);
    await clock.advance(1);
    expect(version.value).toBeGreaterThan(v);
  });

  it('callers that arrive during a re-read wait for that one read', async () => {
    const { clock, snapshot, reader } = setup();
    await reader.refresh();
    await clock.advance(STATUS_MAX_AGE_MS);
    let open!: () => void;
    snapshot.gate = new Promise<void>((r) => (open = r));
    const calls = [reader.status(), reader.status(), reader.freshen()] as const;
    await settle();
    expect(snapshot.reads).toBe(2);
    open();
    const [a, b, fresh] = await Promise.all(calls);
    expect(snapshot.reads).toBe(2);
    expect(fresh).toBe(true);
    expect(a.node.observedAt).toBe(b.node.observedAt);
  });

  it('does not read the node while an operation runs', async () => {
    const { clock, snapshot, state, reader } = setup();
    await reader.refresh();
    state.running = op('op-2', 'running');
    await clock.advance(10 * STATUS_MAX_AGE_MS);
    expect(await reader.freshen()).toBe(true);
    await reader.status();
    expect(snapshot.reads).toBe(1);
  });

  it('a read that does not end in time: the old facts, with a stale-facts warning naming their time', async () => {
    const { clock, snapshot, reader } = setup();
    await reader.refresh();
    const observed = snapshot.node.observedAt;
    await clock.advance(STATUS_MAX_AGE_MS);
    let open!: () => void;
    snapshot.gate = new Promise<void>((r) => (open = r));
    let answered = false;
    const waiting = reader.status().finally(() => (answered = true));
    await clock.advance(STATUS_READ_WAIT_MS - 1);
    expect(answered).toBe(false);
    await clock.advance(1);
    const slow = await waiting;
    expect(slow.node.observedAt).toBe(observed);
    expect(slow.node.warnings.at(-1)).toEqual({
      code: 'stale-facts',
      message: `the node's facts are from ${observed}: a read of the node has not finished in 2 s`,
    });
    expect(await reader.freshen()).toBe(false);
    open();
    await settle();
    const done = await reader.status();
    expect(done.node.warnings.map((w) => w.code)).not.toContain('stale-facts');
    expect(snapshot.reads).toBe(2);
  });
});

describe('StatusReader: the answer', () => {
  it("the snapshot's warnings, then the parts'; the cordon, repair and operations from their sources", async () => {
    const { state, reader } = setup();
    const running = op('op-3', 'running');
    state.running = running;
    state.history = [running, op('op-2', 'succeeded'), op('op-1', 'failed')];
    state.cordoned = true;
    state.warnings = [{ code: 'pending-uncordon', operationId: 'op-0', message: 'still cordoned' }];
    const s = await reader.status();
    expect(s.operation).toBe(running);
    expect(s.lastOperation?.id).toBe('op-2');
    expect(s.node.cordoned).toBe(true);
    expect(s.node.repair).toEqual(REPAIR);
    expect(s.node.warnings.map((w) => w.code)).toEqual(['host', 'pending-uncordon']);
    expect(state.upkeep).toBe(1);
    // With no operation running, the newest record is the last operation.
    state.running = null;
    expect((await reader.status()).lastOperation?.id).toBe('op-3');
  });
});
