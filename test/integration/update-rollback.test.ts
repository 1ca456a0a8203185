/**
 * Rollback (docs/architecture.md, issue 4): a target that does not come up healthy is stopped and the
 * source started again (`rolled_back`); when the source fails too the update is `failed` with
 * both reasons. Faults are injected through `AGENTD_SIM_FAULTS` on a node joined without them.
 * In the cold order (`--switch-order cold`) the source is booted again; in the standby order (the
 * default, docs/architecture.md, "Hot standby") it never stopped booting, so a source that could
 * not boot still comes back, and a target that cannot boot fails before the node goes down.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  JOIN_VERSION,
  NEW_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  expectSingleMachine,
  type SimNode,
} from '../support/sim-node.js';

describe('rollback', () => {
  let template: SimNode;
  beforeAll(async () => {
    template = await createJoinedTemplate();
  });
  afterAll(async () => {
    await disposeSimNode(template);
  });

  async function updateWithFaults(
    faults: string,
    order: 'cold' | 'standby' = 'cold',
  ): Promise<{ node: SimNode; op: Awaited<ReturnType<SimNode['update']>> }> {
    const node = await cloneSimNode(template);
    await node.start({ faults, args: order === 'cold' ? ['--switch-order', 'cold'] : [] });
    const op = await node.update({ wait: true, set: { kubernetesVersion: NEW_VERSION } });
    return { node, op };
  }

  const phaseStates = (op: { phases: Array<{ name: string; state: string }> }): Record<string, string> =>
    Object.fromEntries(op.phases.map((p) => [p.name, p.state]));

  it.each(['cold', 'standby'] as const)(
    '%s: kubelet-inactive:kube2 → rolled_back, the node is back on kube1 and kube2 is gone',
    async (order) => {
      const { node, op } = await updateWithFaults('kubelet-inactive:kube2', order);
      expect(op.state, JSON.stringify(op.error)).toBe('rolled_back');
      expect(op.error?.code).toBe('VERIFY_FAILED');
      expect(op.error?.message).toContain('kube2');
      expect(phaseStates(op)).toMatchObject({
        preflight: 'succeeded',
        provision: 'succeeded',
        stage: 'succeeded',
        standby: order === 'standby' ? 'succeeded' : 'skipped',
        stop: 'succeeded',
        start: 'succeeded',
        verify: 'failed',
        commit: 'skipped',
        cleanup: 'skipped',
        rollback: 'succeeded',
      });
      await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
      expect(await node.readJournal()).toMatchObject({
        operationId: op.id,
        closed: true,
        outcome: 'rolled_back',
      });
    },
  );

  it('standby: start-fails:kube2 → failed in standby: kube1 never stopped serving, kube2 is gone', async () => {
    const { node, op } = await updateWithFaults('start-fails:kube2', 'standby');
    expect(op.state, JSON.stringify(op.error)).toBe('failed');
    expect(op.error?.code).toBe('MACHINE_START_FAILED');
    expect(op.error?.message).toContain('the node: kube1 serves');
    expect(phaseStates(op)).toMatchObject({ standby: 'failed', stop: 'skipped', start: 'skipped' });
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
    expect(await node.readJournal()).toMatchObject({ sourceStopped: false, closed: true, outcome: 'failed' });
  });

  it('standby: kubelet-inactive:kube2 and start-fails:kube1 → rolled_back: kube1 needs no boot to come back', async () => {
    const { node, op } = await updateWithFaults('kubelet-inactive:kube2,start-fails:kube1', 'standby');
    expect(op.state, JSON.stringify(op.error)).toBe('rolled_back');
    expect(phaseStates(op)).toMatchObject({ verify: 'failed', rollback: 'succeeded' });
    expect((op.result?.rollback as Array<{ step: string }>).map((s) => s.step)).toEqual([
      'stop services in kube2',
      'start services in kube1',
      'verify kube1',
      'stop kube2',
      'remove kube2',
      'remove kube2 nspawn files',
      'remove kube2 applied config',
      'daemon-reload',
    ]);
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
  });

  it('cold: start-fails:kube2 → rolled_back', async () => {
    const { node, op } = await updateWithFaults('start-fails:kube2');
    expect(op.state, JSON.stringify(op.error)).toBe('rolled_back');
    // The machine did not start: a code of its own, the failed host command as its cause.
    expect(op.error?.code).toBe('MACHINE_START_FAILED');
    expect(op.error?.data).toMatchObject({ machine: 'kube2', causeCode: 'COMMAND_FAILED' });
    expect(phaseStates(op)).toMatchObject({
      stop: 'succeeded',
      start: 'failed',
      verify: 'skipped',
      rollback: 'succeeded',
    });
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
    expect(await node.readJournal()).toMatchObject({
      operationId: op.id,
      closed: true,
      outcome: 'rolled_back',
    });
  });

  it('cold: kubelet-inactive:kube2 and start-fails:kube1 → failed, with both reasons', async () => {
    const { node, op } = await updateWithFaults('kubelet-inactive:kube2,start-fails:kube1');
    expect(op.state).toBe('failed');
    expect(phaseStates(op)).toMatchObject({ verify: 'failed', rollback: 'failed' });
    // Both reasons: why kube2 was refused, and why kube1 did not come back.
    expect(op.error?.message).toMatch(/verify machine kube2: kubelet not healthy/);
    expect(op.error?.message).toMatch(/rollback to kube1 failed too: .*start-fails:kube1/s);
    expect(op.error?.data?.failure).toMatchObject({ code: 'VERIFY_FAILED' });
    expect(op.error?.data?.rollback).toEqual(
      expect.arrayContaining([expect.objectContaining({ step: 'start kube1', ok: false })]),
    );
    // Nothing serves; kube1 stays the recorded active machine, its config untouched.
    const { node: status } = await node.status();
    expect(status.activeMachine).toBe('kube1');
    expect(status.machines.filter((m) => m.state === 'running')).toEqual([]);
    expect((await node.readVerifiedApplied('kube1')).Cluster.Version).toBe(JOIN_VERSION);
    expect(await node.readJournal()).toMatchObject({ operationId: op.id, closed: true, outcome: 'failed' });
  });
});
