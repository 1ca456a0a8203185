/**
 * The update's `slot` phase (docs/fleet.md): it waits in the fleet gate between stage and drain,
 * shows why in the operation, is cancellable while waiting, and frees the slot with the outcome.
 */
import { describe, expect, it } from 'vitest';
import {
  UPDATE_PHASES,
  runUpdate,
  type FleetGate,
  type FleetSlot,
  type FleetWait,
} from '../../../src/engine/update.js';
import { configAt, createEngineFixture, type EngineFixture } from './fakes.js';

const OLD = configAt('1.34.0');
const NEW = configAt('1.35.0');

async function joinedFixture(): Promise<EngineFixture> {
  const f = await createEngineFixture();
  await f.applied.write('kube1', OLD);
  f.machines.running.add('kube1');
  f.machines.present.add('kube1');
  return f;
}

/** A gate that reports a wait, then grants a slot when `grant()` is called (or at once). */
function fakeGate(options: { wait?: FleetWait; noPolicy?: boolean } = {}) {
  const released: Array<{ state: string; message: string | null }> = [];
  const calls: string[] = [];
  let grant: () => void = () => {};
  const granted = new Promise<void>((resolve) => (grant = resolve));
  const slot: FleetSlot = {
    name: 'agentd-slot-0',
    lostReason: () => null,
    release: async (o) => {
      calls.push('release');
      released.push({ state: o.state, message: o.message });
    },
  };
  const gate: FleetGate = {
    async acquire({ signal, onWait }) {
      calls.push('acquire');
      if (options.noPolicy) return null;
      if (options.wait) {
        onWait(options.wait);
        await new Promise<void>((resolve, reject) => {
          signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
          void granted.then(resolve);
        });
        onWait(null);
      }
      return slot;
    },
  };
  return { gate, released, calls, grant };
}

const WAIT: FleetWait = {
  reason: 'OutsideWindow',
  message: 'next window at 01:00',
  since: '2026-11-25T12:00:00.000Z',
};

describe('runUpdate: the fleet gate (slot phase)', () => {
  it('takes a slot after stage, before anything stops, and frees it after success', async () => {
    const f = await joinedFixture();
    const g = fakeGate();
    const rec = f.recorder(UPDATE_PHASES);
    const outcome = await runUpdate(
      { ...f.deps, fleet: g.gate },
      rec,
      { source: 'kube1', target: 'kube2', config: NEW, drain: false },
      new AbortController().signal,
    );
    expect(outcome.state).toBe('succeeded');
    expect(rec.op.phases.find((p) => p.name === 'slot')?.state).toBe('succeeded');
    expect(outcome.result.fleet).toEqual({ slot: 'agentd-slot-0' });
    expect(g.released).toEqual([{ state: 'succeeded', message: null }]);
  });

  it('shows the wait reason in the operation while it waits, and clears it', async () => {
    const f = await joinedFixture();
    const g = fakeGate({ wait: WAIT });
    const rec = f.recorder(UPDATE_PHASES);
    const running = runUpdate(
      { ...f.deps, fleet: g.gate },
      rec,
      { source: 'kube1', target: 'kube2', config: NEW, drain: false },
      new AbortController().signal,
    );
    await expect.poll(() => rec.op.wait, { timeout: 10_000 }).toEqual(WAIT);
    expect(rec.op.phases.find((p) => p.name === 'slot')?.state).toBe('running');
    expect(f.log.calls).not.toContain('stop kube1');
    g.grant();
    expect((await running).state).toBe('succeeded');
    expect(rec.op.wait).toBeUndefined();
  });

  it('is cancellable while waiting: the target is removed, the source never stopped, no slot freed', async () => {
    const f = await joinedFixture();
    const g = fakeGate({ wait: WAIT });
    const rec = f.recorder(UPDATE_PHASES);
    const ac = new AbortController();
    const running = runUpdate(
      { ...f.deps, fleet: g.gate },
      rec,
      { source: 'kube1', target: 'kube2', config: NEW, drain: false },
      ac.signal,
    );
    await expect.poll(() => rec.op.wait?.reason, { timeout: 10_000 }).toBe('OutsideWindow');
    ac.abort();
    const outcome = await running;
    expect(outcome.state).toBe('cancelled');
    expect(rec.op.phases.find((p) => p.name === 'slot')?.state).toBe('cancelled');
    expect(rec.op.wait).toBeUndefined();
    expect(f.log.calls).not.toContain('stop kube1');
    expect(f.machines.running).toEqual(new Set(['kube1']));
    expect(g.released).toEqual([]);
  });

  it('frees the slot with the failure after a rollback (it counts toward the halt)', async () => {
    const f = await joinedFixture();
    f.log.fail('verify kube2');
    const g = fakeGate();
    const rec = f.recorder(UPDATE_PHASES);
    const outcome = await runUpdate(
      { ...f.deps, fleet: g.gate },
      rec,
      { source: 'kube1', target: 'kube2', config: NEW, drain: false },
      new AbortController().signal,
    );
    expect(outcome.state).toBe('rolled_back');
    expect(g.released).toHaveLength(1);
    expect(g.released[0]?.state).toBe('rolled_back');
    expect(g.released[0]?.message).toMatch(/verify/);
    expect(f.machines.running).toEqual(new Set(['kube1']));
  });

  it('skips the phase without a fleet policy, and with --ignore-fleet never asks the gate', async () => {
    const f = await joinedFixture();
    const none = fakeGate({ noPolicy: true });
    const rec = f.recorder(UPDATE_PHASES);
    await runUpdate(
      { ...f.deps, fleet: none.gate },
      rec,
      { source: 'kube1', target: 'kube2', config: NEW, drain: false },
      new AbortController().signal,
    );
    expect(rec.op.phases.find((p) => p.name === 'slot')?.state).toBe('skipped');
    expect(none.calls).toEqual(['acquire']);

    const g2 = await joinedFixture();
    const ignored = fakeGate();
    const rec2 = g2.recorder(UPDATE_PHASES);
    const outcome = await runUpdate(
      { ...g2.deps, fleet: ignored.gate },
      rec2,
      { source: 'kube1', target: 'kube2', config: NEW, drain: false, ignoreFleet: true },
      new AbortController().signal,
    );
    expect(outcome.state).toBe('succeeded');
    expect(rec2.op.phases.find((p) => p.name === 'slot')?.state).toBe('skipped');
    expect(ignored.calls).toEqual([]);
  });
});
