/**
 * The Engine with fake host pieces: one mutating operation at a time (BUSY names the running
 * one), idempotency keys, cancel before and after the point of no return, no-op and dry run.
 */
import { describe, expect, it, vi } from 'vitest';
import type { Clock } from '../../../src/host/types.js';
import { createManualClock } from '../../support/manual-clock.js';
import type { NodeDrainOps } from '../../../src/engine/drain-ops.js';
import { Engine, type EngineOptions } from '../../../src/engine/engine.js';
import { STATUS_MAX_AGE_MS, STATUS_READ_WAIT_MS } from '../../../src/engine/status-reader.js';
import { NODE_NOT_READ_YET, recoveringReason } from '../../../src/engine/node-health.js';
import { readJournal, writeJournal } from '../../../src/engine/journal.js';
import { writeNodeState } from '../../../src/engine/node-state.js';
import type { NodeDrainer } from '../../../src/engine/update.js';
import type { Operation } from '../../../src/engine/operation.js';
import type { AgentError } from '../../../src/errors.js';
import { BusyError } from '../../../src/errors.js';
import { config, createEngineFixture, makeJournal, silentLogger, type EngineFixture } from './fakes.js';

const BASE = config();

function createEngine(
  f: EngineFixture,
  extra: { statusMaxAgeMs?: number; clock?: Clock; onRecovering?: EngineOptions['onRecovering'] } = {},
): Engine {
  return new Engine({
    paths: f.paths,
    stateDir: f.stateDir,
    machines: f.machines,
    provisioner: f.provisioner,
    clock: f.clock,
    logger: silentLogger,
    metrics: f.metrics,
    events: f.events,
    defaultConfig: () => structuredClone(BASE),
    verifyTimeoutMs: 1000,
    ...extra,
  });
}

/**
 * An engine on a clock that moves only when the test says (the fixture's clock ends every sleep at
 * once, so a deadline would pass before any read could end), on a node joined to kube1 by its files.
 */
async function statusEngine(extra: { statusMaxAgeMs?: number } = {}) {
  const f = await createEngineFixture();
  const clock = createManualClock();
  await f.applied.write('kube1', structuredClone(BASE));
  await writeNodeState(f.stateDir, 'kube1', new Date(clock.now()));
  f.machines.running.add('kube1');
  await f.machines.startServices('kube1');
  const engine = createEngine(f, { ...extra, clock });
  await engine.start();
  return { f, clock, engine };
}

/** An engine on a node joined to kube1 with BASE. */
async function joinedEngine(): Promise<{ f: EngineFixture; engine: Engine }> {
  const f = await createEngineFixture();
  const engine = createEngine(f);
  await engine.start();
  const join = await engine.update({ wait: true, requestedBy: 'test' });
  expect(join.state).toBe('succeeded');
  f.log.calls.length = 0;
  return { f, engine };
}

const to = (version: string) => ({ set: { kubernetesVersion: version }, requestedBy: 'test' });

async function settle<T>(p: Promise<T>): Promise<{ value?: T; error?: AgentError }> {
  try {
    return { value: await p };
  } catch (err) {
    return { error: err as AgentError };
  }
}

describe('Engine: one operation at a time', () => {
  it('a join with the default config, then status shows kube1 active', async () => {
    const { engine } = await joinedEngine();
    const { node, operation, lastOperation } = await engine.status();
    expect(node.activeMachine).toBe('kube1');
    expect(node.applied?.kubernetesVersion).toBe('1.34.0');
    expect(operation).toBeNull();
    expect(lastOperation).toMatchObject({ kind: 'update', state: 'succeeded', to: 'kube1' });
  });

  it('five concurrent updates: one operation; the others BUSY naming it, even while it is being admitted', async () => {
    const { f, engine } = await joinedEngine();
    let open!: () => void;
    f.machines.inspectGate = new Promise<void>((r) => (open = r)); // hold the admission's node refresh
    const calls = ['1.35.0', '1.35.1', '1.35.2', '1.36.0', '1.36.1'].map((v) => settle(engine.update(to(v))));
    open();
    f.machines.inspectGate = null;
    const answers = await Promise.all(calls);
    const started = answers.filter((a) => a.value).map((a) => a.value as Operation);
    expect(started).toHaveLength(1);
    const id = started[0]!.id;
    const refused = answers.filter((a) => a.error).map((a) => a.error!);
    expect(refused).toHaveLength(4);
    for (const err of refused) {
      expect(err).toBeInstanceOf(BusyError);
      expect(err.data).toEqual({ operation: id, kind: 'update' });
    }
    expect((await engine.waitOperation(id, undefined)).state).toBe('succeeded');
    expect(engine.listOperations({}).filter((o) => o.kind === 'update')).toHaveLength(2);
  });

  it('a dry run during an admission does not release it: a third call is still BUSY', async () => {
    const { f, engine } = await joinedEngine();
    let open!: () => void;
    f.machines.inspectGate = new Promise<void>((r) => (open = r));
    const first = settle(engine.update(to('1.35.0')));
    const dry = settle(engine.update({ ...to('1.36.0'), dryRun: true }));
    const third = settle(engine.update(to('1.37.0')));
    open();
    f.machines.inspectGate = null;
    const [a, d, c] = await Promise.all([first, dry, third]);
    expect(d.value?.result).toMatchObject({ dryRun: true });
    expect(c.error?.code).toBe('BUSY');
    expect(c.error?.data.operation).toBe(a.value?.id);
    await engine.waitOperation(a.value!.id, undefined);
  });

  it('an update waiting for its end (wait: true) does not hold the admission: the next call is BUSY at once', async () => {
    const { f, engine } = await joinedEngine();
    const held = f.log.hold('stage kube2');
    const waiting = engine.update({ ...to('1.35.0'), wait: true });
    await held.reached;
    const running = (await engine.status()).operation;
    expect(running).not.toBeNull();
    // Before the fix this call queued behind the admission and then ran a second update.
    await expect(engine.update(to('1.36.0'))).rejects.toMatchObject({
      code: 'BUSY',
      data: { operation: running!.id },
    });
    held.release();
    expect((await waiting).state).toBe('succeeded');
    expect(engine.listOperations({}).filter((o) => o.kind === 'update')).toHaveLength(2);
  });

  it('reset while an update runs is BUSY; the next update after it ends runs', async () => {
    const { f, engine } = await joinedEngine();
    const held = f.log.hold('stage kube2');
    const op = await engine.update(to('1.35.0'));
    await held.reached;
    await expect(engine.reset({ requestedBy: 'test' })).rejects.toMatchObject({
      code: 'BUSY',
      data: { operation: op.id },
    });
    held.release();
    expect((await engine.waitOperation(op.id, undefined)).state).toBe('succeeded');
    expect((await engine.update({ ...to('1.36.0'), wait: true })).state).toBe('succeeded');
  });

  it('an update whose admission fails (invalid) lets the next caller go ahead', async () => {
    const { engine } = await joinedEngine();
    const bad = settle(engine.update(to('not-a-version')));
    const good = settle(engine.update({ ...to('1.35.0'), wait: true }));
    const [b, g] = await Promise.all([bad, good]);
    expect(b.error?.code).toBe('INVALID_PARAMS');
    expect(g.value?.state).toBe('succeeded');
  });
});

describe('Engine: idempotency, no-op and dry run', () => {
  it('the same idempotency key returns the same operation, running or ended', async () => {
    const { f, engine } = await joinedEngine();
    const held = f.log.hold('provision kube2');
    const first = await engine.update({ ...to('1.35.0'), idempotencyKey: 'k' });
    await held.reached;
    expect((await engine.update({ ...to('1.35.0'), idempotencyKey: 'k' })).id).toBe(first.id);
    held.release();
    const ended = await engine.update({ ...to('9.9.9'), idempotencyKey: 'k', wait: true });
    expect(ended).toMatchObject({ id: first.id, state: 'succeeded' });
    expect(engine.listOperations({}).filter((o) => o.idempotencyKey === 'k')).toHaveLength(1);
  });

  it('no-op: the applied config again → succeeded, changed=false, no host call', async () => {
    const { f, engine } = await joinedEngine();
    const op = await engine.update({ ...to('1.34.0'), wait: true });
    expect(op).toMatchObject({ state: 'succeeded', phases: [], from: 'kube1', to: 'kube1' });
    expect(op.result?.changed).toBe(false);
    expect(f.log.calls).toEqual([]);
    // force re-provisions even so
    const forced = await engine.update({ requestedBy: 'test', force: true, wait: true });
    expect(forced).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube2' });
  });

  it('dry run: a plan, no host call, nothing recorded', async () => {
    const { f, engine } = await joinedEngine();
    const before = engine.listOperations({});
    const op = await engine.update({ ...to('1.35.0'), dryRun: true });
    expect(op.result).toMatchObject({
      dryRun: true,
      changed: true,
      plan: {
        from: 'kube1',
        to: 'kube2',
        changes: [{ path: 'Cluster.Version', from: '1.34.0', to: '1.35.0' }],
        phases: ['preflight', 'provision', 'stage', 'stop', 'start', 'verify', 'commit', 'cleanup'],
        files: ['/var/lib/machines/kube2/etc/hostname'],
        removes: [f.paths.machineDir('kube1'), f.paths.appliedConfig('kube1')],
      },
    });
    // Only the preflight checks ran (no side effects): nothing else touched the host.
    expect(f.log.calls).toEqual(['preflight']);
    expect(op.result?.preflight).toEqual(f.provisioner.checks);
    expect(engine.listOperations({})).toEqual(before);
  });

  it('dry run whose preflight would fail: failed with the code the update would end with', async () => {
    const { f, engine } = await joinedEngine();
    f.provisioner.checks = [{ name: 'artifact:kubelet', ok: false, message: 'GET …/v99.0.0/kubelet: 404' }];
    const op = await engine.update({ ...to('99.0.0'), dryRun: true });
    expect(op.state).toBe('failed');
    expect(op.error).toMatchObject({ code: 'DOWNLOAD_FAILED', data: { checks: f.provisioner.checks } });
    expect(f.log.calls).toEqual(['preflight']);
  });
});

describe('Engine: cancel', () => {
  it('before stop: the operation ends cancelled and the target is removed', async () => {
    const { f, engine } = await joinedEngine();
    const held = f.log.hold('provision kube2');
    const op = await engine.update(to('1.35.0'));
    await held.reached;
    engine.cancelOperation(op.id);
    const done = await engine.waitOperation(op.id, undefined);
    expect(done.state).toBe('cancelled');
    expect(f.log.calls).not.toContain('stop kube1');
    expect(f.log.calls).toContain('remove kube2');
    expect((await engine.status()).node.activeMachine).toBe('kube1');
  });

  it('after stop: PRECONDITION_FAILED naming the phase, and the update completes', async () => {
    const { f, engine } = await joinedEngine();
    const held = f.log.hold('start kube2');
    const op = await engine.update(to('1.35.0'));
    await held.reached;
    let err: AgentError | undefined;
    try {
      engine.cancelOperation(op.id);
    } catch (e) {
      err = e as AgentError;
    }
    expect(err?.code).toBe('PRECONDITION_FAILED');
    expect(err?.data).toEqual({ phase: 'start' });
    held.release();
    expect((await engine.waitOperation(op.id, undefined)).state).toBe('succeeded');
  });

  it('an ended operation: PRECONDITION_FAILED; an unknown one: NOT_FOUND', async () => {
    const { engine } = await joinedEngine();
    const [join] = engine.listOperations({});
    expect(() => engine.cancelOperation(join!.id)).toThrow(
      expect.objectContaining({ code: 'PRECONDITION_FAILED' }),
    );
    expect(() => engine.cancelOperation('op-nope')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  });

  it('shutdown cancels an update that has not stopped the source yet', async () => {
    const { f, engine } = await joinedEngine();
    const held = f.log.hold('stage kube2');
    const op = await engine.update(to('1.35.0'));
    await held.reached;
    // The grace runs on the injected clock: hold it, so shutdown waits for the cancelled update.
    const sleep = f.clock.sleep.bind(f.clock);
    f.clock.sleep = (ms, signal) =>
      ms === 10_000
        ? new Promise((_resolve, reject) =>
            signal?.addEventListener('abort', () => reject(new Error('over'))),
          )
        : sleep(ms, signal);
    expect(await engine.shutdown(10_000)).toBeNull();
    expect(engine.getOperation(op.id).state).toBe('cancelled');
  });

  it('shutdown leaves an update past its grace to recovery', async () => {
    const { f, engine } = await joinedEngine();
    const held = f.log.hold('stage kube2');
    const op = await engine.update(to('1.35.0'));
    await held.reached;
    f.clock.sleep = async () => undefined; // the grace is over at once
    const left = await engine.shutdown(10_000);
    expect(engine.getOperation(op.id).state).toBe('running');
    // The daemon learns what is still in flight, to say so and exit without releasing its lock.
    expect(left?.operation).toMatchObject({ id: op.id, state: 'running' });
    held.release();
  });
});

describe('Engine.statusVersion', () => {
  it('moves on once the snapshot is older than statusMaxAgeMs on the injected clock, and the next status reads the node first', async () => {
    const { f, clock, engine } = await statusEngine({ statusMaxAgeMs: 5000 });
    const fresh = engine.statusVersion.value;
    const first = await engine.status();
    expect(first.node.observedAt).toBe(new Date(clock.now()).toISOString());
    await clock.advance(4999);
    // No read while the snapshot is young.
    expect(engine.statusVersion.value).toBe(fresh);
    const inspect = vi.spyOn(f.machines, 'inspect');
    expect((await engine.status()).node.observedAt).toBe(first.node.observedAt);
    expect(inspect).not.toHaveBeenCalled();
    await clock.advance(1);
    const old = engine.statusVersion.value;
    expect(old).toBeGreaterThan(fresh);
    // Past the age, status answers after a read; callers meanwhile share that one read.
    const [a, b] = await Promise.all([engine.status(), engine.status()]);
    expect(inspect).toHaveBeenCalledTimes(2); // one read: kube1 and kube2
    expect(engine.statusVersion.value).toBeGreaterThan(old);
    for (const s of [a, b]) expect(s.node.observedAt).toBe(new Date(clock.now()).toISOString());
    // The new snapshot is young again: nothing moves until the clock does.
    const renewed = engine.statusVersion.value;
    await clock.advance(4999);
    expect(engine.statusVersion.value).toBe(renewed);
    await engine.status();
    expect(inspect).toHaveBeenCalledTimes(2);
    await engine.shutdown(0);
  });

  it('shows a change on the node made behind its back at the first status past the age (1 s by default)', async () => {
    const { f, clock, engine } = await statusEngine();
    expect((await engine.status()).node).toMatchObject({ activeMachine: 'kube1', serving: true });
    f.machines.running.delete('kube1');
    // Within the age the snapshot stands (observedAt says how old it is)...
    await clock.advance(STATUS_MAX_AGE_MS - 1);
    expect((await engine.status()).node).toMatchObject({ serving: true });
    // ...and the first status past it reads the node before answering.
    await clock.advance(1);
    const after = (await engine.status()).node;
    expect(after).toMatchObject({ serving: false });
    expect(after.machines.find((m) => m.name === 'kube1')?.kubelet).toBe('inactive');
    expect(after.observedAt).toBe(new Date(clock.now()).toISOString());
    await engine.shutdown(0);
  });

  it('answers the old facts with a warning that names their age when a read takes longer than 2 s', async () => {
    const { f, clock, engine } = await statusEngine();
    const observed = (await engine.status()).node.observedAt;
    await clock.advance(STATUS_MAX_AGE_MS);
    let open!: () => void;
    f.machines.inspectGate = new Promise<void>((r) => (open = r));
    let answered = false;
    const waiting = engine.status().finally(() => (answered = true));
    // The caller waits for the read, STATUS_READ_WAIT_MS on the injected clock...
    await clock.advance(STATUS_READ_WAIT_MS - 1);
    expect(answered).toBe(false);
    // ...then answers what it has, and says so.
    await clock.advance(1);
    const slow = await waiting;
    expect(slow.node.observedAt).toBe(observed);
    expect(slow.node.warnings).toContainEqual({
      code: 'stale-facts',
      message: `the node's facts are from ${observed}: a read of the node has not finished in 2 s`,
    });
    // A caller while that read still runs does not wait again.
    expect((await engine.status()).node.warnings.some((w) => w.code === 'stale-facts')).toBe(true);
    const version = engine.statusVersion.value;
    open();
    f.machines.inspectGate = null;
    await vi.waitFor(() => expect(engine.statusVersion.value).toBeGreaterThan(version));
    const done = await engine.status();
    expect(done.node.observedAt).not.toBe(observed);
    expect(done.node.warnings.some((w) => w.code === 'stale-facts')).toBe(false);
    await engine.shutdown(0);
  });

  it('does not read the node for status while an operation runs', async () => {
    const { f, engine } = await joinedEngine();
    const held = f.log.hold('stage kube2');
    const running = engine.update({ ...to('1.35.0'), wait: true });
    await held.reached;
    f.clock.advance(10 * STATUS_MAX_AGE_MS);
    const inspect = vi.spyOn(f.machines, 'inspect');
    const during = await engine.status();
    expect(during.operation).not.toBeNull();
    expect(inspect).not.toHaveBeenCalled();
    held.release();
    expect((await running).state).toBe('succeeded');
    await engine.shutdown(0);
  });

  it('stays the same while nothing changed, and moves on with an operation', async () => {
    const { engine } = await joinedEngine();
    const first = engine.statusVersion.value;
    await engine.status();
    expect(engine.statusVersion.value).toBe(first);
    const noop = await engine.update({ wait: true, requestedBy: 'test' });
    expect(noop.state).toBe('succeeded');
    expect(engine.statusVersion.value).toBeGreaterThan(first);
  });
});

describe('Engine.start: what status says until the node is read', () => {
  it('a first start says that agentd is starting, never that it recovers the node', async () => {
    const f = await createEngineFixture();
    const onRecovering = vi.fn();
    const engine = createEngine(f, { onRecovering });
    expect((await engine.status()).node).toMatchObject({ serving: false, servingReason: NODE_NOT_READ_YET });
    await engine.start();
    expect(onRecovering).not.toHaveBeenCalled();
    expect((await engine.status()).node.servingReason).toBe('the node has not joined: no machine is active');
    await engine.shutdown(0);
  });

  it('a start after a restart interrupted an update names it while recovery completes it', async () => {
    const f = await createEngineFixture();
    await f.applied.write('kube1', structuredClone(BASE));
    await writeNodeState(f.stateDir, 'kube1', new Date(f.clock.now()));
    // Killed in `stop`: kube1 is stopped, and recovery starts it again.
    await writeJournal(f.stateDir, makeJournal({ operationId: 'op-7' }));
    const onRecovering = vi.fn();
    const engine = createEngine(f, { onRecovering });
    const held = f.log.hold('start kube1');
    const starting = engine.start();
    await held.reached;
    expect(onRecovering).toHaveBeenCalledWith({ id: 'op-7', kind: 'update' });
    expect((await engine.status()).node.servingReason).toBe(recoveringReason({ id: 'op-7', kind: 'update' }));
    expect(recoveringReason({ id: 'op-7', kind: 'update' })).toBe(
      'agentd is recovering the node after a restart: operation op-7 (update) was interrupted; try again shortly',
    );
    held.release();
    await starting;
    expect((await engine.status()).node).toMatchObject({ activeMachine: 'kube1', serving: true });
    await engine.shutdown(0);
  });
});

describe('Engine: an uncordon recovery had to leave pending', () => {
  /** A node on kube1 whose update cordoned it, then the daemon was killed in `stop`. */
  async function crashedWhileCordoned(f: EngineFixture): Promise<string> {
    await f.applied.write('kube1', structuredClone(BASE));
    await writeNodeState(f.stateDir, 'kube1', new Date(f.clock.now()));
    const rec = f.recorder(['drain', 'stop', 'start']);
    await rec.start();
    await rec.phaseEnded('drain', 'succeeded');
    await rec.phaseStarted('stop');
    await writeJournal(
      f.stateDir,
      makeJournal({
        operationId: rec.op.id,
        cordonedByUs: true,
        updatedAt: new Date(f.clock.now()).toISOString(),
      }),
    );
    return rec.op.id;
  }

  /**
   * An engine whose Kubernetes availability the test switches, as the daemon's getter does. Not
   * through `createEngine`: its options spread would read the `drainer` getter once and freeze it.
   */
  function kubeEngine(f: EngineFixture) {
    const kube = { available: false, uncordons: 0, failUncordon: false };
    const drainer: NodeDrainer = {
      drain: async () => ({ cordonedByUs: false, result: {} }),
      uncordon: async () => {
        if (kube.failUncordon) throw new Error('connection refused');
        kube.uncordons += 1;
      },
    };
    const nodeOps: NodeDrainOps = {
      unavailableReason: () => (kube.available ? null : 'the Kubernetes client is still loading'),
      cordoned: () => null,
      cordon: async () => ({ alreadyCordoned: true }),
      drain: () => Promise.reject(new Error('not in this test')),
      uncordon: async () => {
        kube.uncordons += 1;
        return { uncordoned: true, outcome: 'uncordoned' };
      },
    };
    const engine = new Engine({
      paths: f.paths,
      stateDir: f.stateDir,
      machines: f.machines,
      provisioner: f.provisioner,
      clock: f.clock,
      logger: silentLogger,
      metrics: f.metrics,
      events: f.events,
      defaultConfig: () => structuredClone(BASE),
      verifyTimeoutMs: 1000,
      nodeOps,
      get drainer() {
        return kube.available ? drainer : null;
      },
    });
    return { engine, kube };
  }

  const pendingWarning = async (engine: Engine): Promise<string | undefined> => {
    const found = (await engine.status()).node.warnings.filter((w) => w.code === 'pending-uncordon');
    expect(found.length).toBeLessThanOrEqual(1);
    return found[0]?.message;
  };

  it('recovery without Kubernetes defers it; once ready and available, agentd uncordons and clears the flag', async () => {
    const f = await createEngineFixture();
    const id = await crashedWhileCordoned(f);
    const { engine, kube } = kubeEngine(f);
    const report = await engine.start();
    expect(report).toMatchObject({ ok: true, uncordonPending: true, activeMachine: 'kube1' });
    expect(engine.pendingUncordon).toBe(id);
    expect(await pendingWarning(engine)).toBe(
      `the node is still cordoned by interrupted operation ${id}: run agentctl uncordon`,
    );

    kube.available = true;
    expect(await engine.completePendingUncordon()).toBe('uncordoned');
    expect(kube.uncordons).toBe(1);
    expect(engine.pendingUncordon).toBeNull();
    expect(await readJournal(f.stateDir)).toMatchObject({
      operationId: id,
      closed: true,
      uncordonPending: false,
    });
    expect(await pendingWarning(engine)).toBeUndefined();
    // Nothing left to do the second time.
    expect(await engine.completePendingUncordon()).toBe('none');
    expect(kube.uncordons).toBe(1);
  });

  it('Kubernetes still unavailable, or the uncordon fails: the flag stays, status keeps warning', async () => {
    const f = await createEngineFixture();
    const id = await crashedWhileCordoned(f);
    const { engine, kube } = kubeEngine(f);
    await engine.start();
    expect(await engine.completePendingUncordon()).toBe('unavailable');
    kube.available = true;
    kube.failUncordon = true;
    expect(await engine.completePendingUncordon()).toBe('failed');
    expect(engine.pendingUncordon).toBe(id);
    expect(await readJournal(f.stateDir)).toMatchObject({ uncordonPending: true });
    await engine.refreshNode();
    expect(await pendingWarning(engine)).toContain(id);
  });

  it("an operator's uncordon clears the pending flag", async () => {
    const f = await createEngineFixture();
    const id = await crashedWhileCordoned(f);
    const { engine, kube } = kubeEngine(f);
    await engine.start();
    kube.available = true;
    const op = await engine.uncordon({ wait: true, requestedBy: 'test' });
    expect(op.state).toBe('succeeded');
    expect(engine.pendingUncordon).toBeNull();
    expect(await readJournal(f.stateDir)).toMatchObject({ operationId: id, uncordonPending: false });
    expect(await pendingWarning(engine)).toBeUndefined();
  });

  it('an update while it is pending carries it in its journal; agentd uncordons after the update once it can', async () => {
    const f = await createEngineFixture();
    await crashedWhileCordoned(f);
    const { engine, kube } = kubeEngine(f);
    await engine.start();
    const up = await engine.update({ ...to('1.35.0'), wait: true });
    expect(up.state).toBe('succeeded');
    const carried = await readJournal(f.stateDir);
    expect(carried).toMatchObject({ operationId: up.id, closed: true, uncordonPending: true });
    expect(engine.pendingUncordon).not.toBeNull();

    kube.available = true;
    const second = await engine.update({ ...to('1.35.1'), wait: true });
    expect(second.state).toBe('succeeded');
    await vi.waitFor(() => expect(engine.pendingUncordon).toBeNull());
    expect(kube.uncordons).toBe(1);
    expect(await readJournal(f.stateDir)).toMatchObject({ operationId: second.id, uncordonPending: false });
  });
});

describe('a node with two applied configs and no node state', () => {
  it('status warns active-machine-unknown, and update refuses by that code, acting on no machine', async () => {
    const f = await createEngineFixture();
    await f.applied.write('kube1', structuredClone(BASE));
    await f.applied.write('kube2', structuredClone(BASE));
    // Neither runs: startup recovery cannot tell from the host which one is active.
    const engine = createEngine(f);
    await engine.start();
    const { node } = await engine.status();
    expect(node.activeMachine).toBeNull();
    // (No state dir yet in this fixture: the reserve's warning is there too.)
    expect(node.warnings.filter((w) => w.code !== 'reserve-not-whole')).toEqual([
      {
        code: 'active-machine-unknown',
        message: 'both machines have applied configs and no journal says which is active',
      },
    ]);
    const refused = await settle(engine.update(to('1.35.0')));
    expect(refused.error?.code).toBe('PRECONDITION_FAILED');
    expect(refused.error?.message).toBe(
      'the node has applied configs but no active machine (see status warnings); run reset, or recover the node by hand',
    );
    expect(f.log.calls).toEqual([]);
    await engine.shutdown(0);
  });
});

describe('Engine: an update acts on what the host shows', () => {
  /** node.json names kube1; the host has no kube1, and kube2 runs and serves. */
  async function wrongNodeJson() {
    const f = await createEngineFixture();
    await f.applied.write('kube1', structuredClone(BASE));
    await f.applied.write('kube2', structuredClone(BASE));
    await writeNodeState(f.stateDir, 'kube1', new Date(f.clock.now()));
    f.machines.running.add('kube2');
    await f.machines.startServices('kube2');
    f.log.calls.length = 0;
    return f;
  }

  it("the node's read finds node.json against the host: STATE_CONFLICT, nothing done, one read of the host", async () => {
    const f = await wrongNodeJson();
    const engine = createEngine(f);
    await engine.start();
    const inspect = vi.spyOn(f.machines, 'inspect');
    const refused = await settle(engine.update(to('1.35.0')));
    expect(refused.error?.code).toBe('STATE_CONFLICT');
    expect(refused.error?.message).toMatch(
      /^node\.json names kube1 as the active machine, but the host has no machine kube1 and kube2 runs and serves; /,
    );
    expect(refused.error?.data).toMatchObject({
      file: 'node.json',
      host: { kube1: 'absent', kube2: 'serving' },
    });
    // The admission's read of the node is the one the refusal is judged on: each machine asked once.
    expect(inspect.mock.calls.map(([m]) => m)).toEqual(['kube1', 'kube2']);
    expect(f.log.calls).toEqual([]);
    await engine.shutdown(0);
  });

  it('a machine that read could not ask about (no descriptor) is asked again on the reserve, and the update refused', async () => {
    const f = await wrongNodeJson();
    const engine = createEngine(f);
    await engine.start();
    const inspect = f.machines.inspect.bind(f.machines);
    let failKube2 = 1;
    // The node's read asks kube2 as a host without descriptors answers: it cannot say.
    vi.spyOn(f.machines, 'inspect').mockImplementation(async (m, signal) => {
      if (m === 'kube2' && failKube2-- > 0)
        return { name: m, registered: false, running: false, kubelet: 'unknown', healthy: false };
      return inspect(m, signal);
    });
    const refused = await settle(engine.update(to('1.35.0')));
    expect(refused.error?.code).toBe('STATE_CONFLICT');
    expect(refused.error?.data).toMatchObject({ host: { kube2: 'serving' } });
    expect(f.log.calls).toEqual([]);
    await engine.shutdown(0);
  });
});
