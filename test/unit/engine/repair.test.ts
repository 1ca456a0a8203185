/**
 * Repair between requests: an active machine found stopped (or its kubelet down) is started
 * again as a `repair` operation, under the operation slot, with capped backoff on the injected
 * clock, and agentd gives up (and says so) after repeated failure.
 */
import { mkdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { Engine } from '../../../src/engine/engine.js';
import type { RepairPolicy } from '../../../src/engine/repair.js';
import { expectBackoff } from '../../support/backoff.js';
import { config, createEngineFixture, silentLogger, type EngineFixture } from './fakes.js';

const BASE = config();
const POLICY: Partial<RepairPolicy> = {
  checkIntervalMs: 1_000,
  baseDelayMs: 100,
  maxDelayMs: 250,
  maxAttempts: 4,
};

async function joined(enabled = true): Promise<{ f: EngineFixture; engine: Engine }> {
  const f = await createEngineFixture();
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
    repair: { enabled, policy: POLICY },
  });
  await engine.start();
  expect((await engine.update({ wait: true, requestedBy: 'test' })).state).toBe('succeeded');
  // The rootfs on disk: a stopped machine is `stopped`, not `absent`.
  await mkdir(f.paths.machineDir('kube1'), { recursive: true });
  f.log.calls.length = 0;
  return { f, engine };
}

/** The machine stops behind agentd's back (a crash, an operator's machinectl poweroff). */
function crash(f: EngineFixture): void {
  f.machines.running.delete('kube1');
}

describe('repair', () => {
  it('starts a stopped active machine again, as a repair operation, and the node serves', async () => {
    const { f, engine } = await joined();
    crash(f);
    await engine.refreshNode();
    expect((await engine.status()).node).toMatchObject({
      serving: false,
      servingReason: expect.stringMatching(/kube1 is not running/),
    });
    await engine.checkRepair();
    expect(f.log.calls).toEqual(['start kube1', 'startServices kube1', 'verify kube1']);
    const [op] = engine.listOperations({ limit: 1 });
    expect(op).toMatchObject({
      kind: 'repair',
      state: 'succeeded',
      from: 'kube1',
      to: 'kube1',
      requestedBy: 'agentd',
    });
    expect(op!.reason).toMatch(/kube1 is not running/);
    expect((await engine.status()).node).toMatchObject({
      serving: true,
      servingReason: null,
      repair: { state: 'idle' },
    });
    expect(await f.metrics.registry.getSingleMetricAsString('agentd_node_serving')).toMatch(
      /agentd_node_serving 1/,
    );
  });

  it('never starts the machine node.json names while the other one runs and serves (issue 40)', async () => {
    const { f, engine } = await joined();
    crash(f);
    // kube2 serves, though node.json still names kube1 (a stale file).
    await f.machines.start('kube2');
    await f.machines.startServices('kube2');
    f.log.calls.length = 0;
    await engine.checkRepair();
    expect(f.log.calls).toEqual([]);
    expect(engine.listOperations({ limit: 5 }).filter((o) => o.kind === 'repair')).toEqual([]);
  });

  it('does nothing while the node serves, or with repair off', async () => {
    const { f, engine } = await joined();
    await engine.checkRepair();
    expect(f.log.calls).toEqual([]);
    const off = await joined(false);
    crash(off.f);
    await off.engine.checkRepair();
    expect(off.f.log.calls).toEqual([]);
    expect((await off.engine.status()).node.repair).toMatchObject({ state: 'off' });
  });

  it('never fights a running operation: an update holds the slot, the repair waits', async () => {
    const { f, engine } = await joined();
    const held = f.log.hold('provision kube2');
    const update = engine.update({ set: { kubernetesVersion: '1.35.0' }, requestedBy: 'test', wait: true });
    await held.reached;
    crash(f);
    await engine.checkRepair();
    expect(f.log.calls).not.toContain('start kube1');
    expect(engine.listOperations({}).filter((o) => o.kind === 'repair')).toEqual([]);
    held.release();
    await update;
  });

  it('retries with capped backoff on the injected clock, then gives up and says so', async () => {
    const { f, engine } = await joined();
    crash(f);
    f.log.fail('start kube1', undefined, true);
    f.clock.sleeps.length = 0;
    engine.startRepair();
    for (let i = 0; i < 200 && (await engine.status()).node.repair?.state !== 'gave_up'; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    const node = (await engine.status()).node;
    expect(node.repair).toMatchObject({
      state: 'gave_up',
      failures: 4,
      lastError: expect.stringMatching(/^MACHINE_START_FAILED/),
    });
    expect(node.warnings.filter((w) => w.code === 'repair-gave-up')).toEqual([
      {
        code: 'repair-gave-up',
        operationId: node.repair?.lastOperation,
        message: expect.stringMatching(/^agentd gave up repairing the node after 4 failed attempts/),
      },
    ]);
    // 100, 200, then capped at 250 — the waits between the four attempts, jittered by the one
    // backoff policy (src/retry): each between half its nominal delay and the delay itself.
    expectBackoff(f.clock.sleeps.slice(0, 3), [100, 200, 250]);
    const repairs = engine.listOperations({}).filter((o) => o.kind === 'repair');
    expect(repairs).toHaveLength(4);
    expect(repairs[0]).toMatchObject({ state: 'failed', error: { code: 'MACHINE_START_FAILED' } });
    await engine.shutdown(1000);
    expect(f.log.calls.filter((c) => c === 'start kube1')).toHaveLength(4);
  });

  it('an operator update after giving up starts the count afresh', async () => {
    const { f, engine } = await joined();
    crash(f);
    f.log.fail('start kube1', undefined, true);
    for (let i = 0; i < 4; i++) {
      f.clock.sleeps.push(0);
      await f.clock.sleep(1_000);
      await engine.checkRepair();
    }
    expect((await engine.status()).node.repair?.state).toBe('gave_up');
    const update = await engine.update({
      set: { kubernetesVersion: '1.35.0' },
      requestedBy: 'test',
      wait: true,
    });
    expect(update.state).toBe('succeeded');
    await engine.checkRepair();
    expect((await engine.status()).node.repair).toMatchObject({ state: 'idle', failures: 0 });
  });
});
