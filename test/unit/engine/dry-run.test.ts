/**
 * Dry runs on their own (src/engine/dry-run.ts): an update's plan with the preflight the update
 * would run (only when something would change), the phases it would skip, a preflight that would
 * fail as the code the update would end with; a drain's dry run in its record. Nothing is
 * recorded and the host is not touched.
 */
import { describe, expect, it } from 'vitest';
import { planDrain, planUpdate, type UpdatePlanInput } from '../../../src/engine/dry-run.js';
import type { NodeDrainOps } from '../../../src/engine/drain-ops.js';
import { diffConfigs } from '../../../src/engine/goal.js';
import type { Operation } from '../../../src/engine/operation.js';
import type { MachineName } from '../../../src/host/types.js';
import { config, configAt, createEngineFixture } from './fakes.js';

function fresh(kind: Operation['kind'], to: MachineName | null, phases: readonly string[]): Operation {
  return {
    id: 'op-dry',
    kind,
    state: 'pending',
    reason: null,
    requestedBy: 'test',
    idempotencyKey: null,
    createdAt: '2026-01-01T00:00:00.000Z',
    startedAt: null,
    finishedAt: null,
    from: 'kube1',
    to,
    phases: phases.map((name) => ({
      name,
      state: 'pending',
      startedAt: null,
      finishedAt: null,
      error: null,
    })),
    result: null,
    error: null,
  };
}

function input(o: Partial<UpdatePlanInput> = {}): UpdatePlanInput {
  const goal = o.goal ?? configAt('1.35.0');
  const changes = diffConfigs(config(), goal);
  return {
    source: 'kube1',
    target: 'kube2',
    goal,
    changes,
    changed: changes.length > 0,
    drain: false,
    fleet: false,
    healthGate: false,
    standby: false,
    ...o,
  };
}

describe('planUpdate', () => {
  it('a change: runs the preflight, lists the phases that would run and the files, records nothing', async () => {
    const f = await createEngineFixture();
    const plan = await planUpdate(f, input(), (to, phases) => fresh('update', to, phases));
    expect(f.log.calls).toEqual(['preflight']);
    expect(plan).toMatchObject({ state: 'succeeded', to: 'kube2', error: null });
    const result = plan.result as {
      dryRun: boolean;
      changed: boolean;
      plan: Record<string, unknown>;
      preflight: unknown;
    };
    expect(result).toMatchObject({ dryRun: true, changed: true, preflight: f.provisioner.checks });
    expect(result.plan).toMatchObject({
      from: 'kube1',
      to: 'kube2',
      files: ['/var/lib/machines/kube2/etc/hostname'],
      removes: [f.paths.machineDir('kube1'), f.paths.appliedConfig('kube1')],
    });
    // No drain, no fleet gate, no health gate: those phases are skipped.
    const skipped = plan.phases.filter((p) => p.state === 'skipped').map((p) => p.name);
    expect(skipped).toEqual(expect.arrayContaining(['drain', 'uncordon', 'slot', 'health']));
    expect(result.plan.phases).not.toContain('drain');
    expect(result.plan.phases).toContain('provision');
    expect(await f.store.load().then(() => f.store.list())).toEqual([]);
  });

  it('the standby order: the standby phase is planned beside a source, never for a join', async () => {
    const f = await createEngineFixture();
    const create = (to: MachineName | null, phases: readonly string[]): Operation =>
      fresh('update', to, phases);
    const standby = await planUpdate(f, input({ standby: true }), create);
    const plan = (standby.result as { plan: { phases: string[]; switchOrder: string } }).plan;
    expect(plan.switchOrder).toBe('standby');
    expect(plan.phases.slice(0, 4)).toEqual(['preflight', 'provision', 'stage', 'standby']);
    const cold = await planUpdate(f, input({ standby: false }), create);
    expect((cold.result as { plan: { phases: string[]; switchOrder: string } }).plan).toMatchObject({
      switchOrder: 'cold',
    });
    expect((cold.result as { plan: { phases: string[] } }).plan.phases).not.toContain('standby');
    const join = await planUpdate(f, input({ standby: true, source: null, target: 'kube1' }), create);
    expect((join.result as { plan: { phases: string[]; switchOrder: string } }).plan).toMatchObject({
      switchOrder: 'cold',
    });
    expect((join.result as { plan: { phases: string[] } }).plan.phases).not.toContain('standby');
  });

  it('nothing would change: no preflight, no phases', async () => {
    const f = await createEngineFixture();
    const plan = await planUpdate(f, input({ goal: config(), changes: [], changed: false }), (to, phases) =>
      fresh('update', to, phases),
    );
    expect(f.log.calls).toEqual([]);
    expect(plan).toMatchObject({ state: 'succeeded', to: 'kube1', phases: [] });
    expect(plan.result).toMatchObject({ changed: false });
    expect(plan.result).not.toHaveProperty('preflight');
  });

  it('a preflight that would fail: the plan fails with the code the update would end with', async () => {
    const f = await createEngineFixture();
    f.provisioner.checks = [
      { name: 'image', ok: false, message: 'manifest unknown' },
      { name: 'disk-space', ok: true, message: 'enough' },
    ];
    const plan = await planUpdate(f, input(), (to, phases) => fresh('update', to, phases));
    expect(plan.state).toBe('failed');
    expect(plan.error).toEqual({
      code: 'IMAGE_PULL_FAILED',
      message: 'preflight would fail: image: manifest unknown',
      data: { checks: [{ name: 'image', ok: false, message: 'manifest unknown' }] },
    });
  });
});

describe('planDrain', () => {
  it("the drain's own dry run, in a succeeded record with no phases", async () => {
    const f = await createEngineFixture();
    const asked: unknown[] = [];
    const ops = {
      drain: async (o: unknown) => {
        asked.push(o);
        return {
          node: 'worker-01',
          dryRun: true,
          cordon: null,
          evicted: [{ namespace: 'default', name: 'web-1' }],
          skipped: [],
          remaining: [],
          warnings: [],
        };
      },
    } as unknown as NodeDrainOps;
    const op = await planDrain(
      ops,
      { timeoutSeconds: 60, dryRun: true, requestedBy: 'test' },
      fresh('drain', 'kube1', []),
      f.clock,
    );
    expect(asked).toEqual([expect.objectContaining({ dryRun: true })]);
    expect(op).toMatchObject({ state: 'succeeded', phases: [] });
    expect(op.startedAt).not.toBeNull();
    expect(op.finishedAt).not.toBeNull();
    expect(op.result).toMatchObject({ evicted: [{ namespace: 'default', name: 'web-1' }] });
  });
});
