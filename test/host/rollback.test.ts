/**
 * Rollback on real systemd: a target whose kubelet never turns healthy ends `rolled_back` with
 * the source machine running and verified again, and nothing of the target left; in the standby
 * order (the default) the source never stopped booting and only its services come back. A target
 * machine that cannot boot (its image has no init) fails the update in standby, before the node
 * goes down; in the cold order it is rolled back. An update cancelled while it
 * provisions ends `cancelled` the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNode, type OperationJson } from '../support/real-host/assert-node.js';
import { setSwitchOrder } from '../support/real-host/faults.js';
import { startJoinedNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

describe.skipIf(!requireRealHost())('rollback on a real systemd host', { timeout: 180_000 }, () => {
  let node: RealNode;

  beforeAll(async () => {
    // kubelet 1.36.x from this mirror runs but never answers /healthz.
    node = await startJoinedNode({ label: 'rollback', unhealthyKubelet: '^1\\.36\\.' });
  }, 600_000);

  afterAll(async () => {
    await node?.stop();
  }, 120_000);

  it('standby order: rolls back to kube1 without a boot when kube2s kubelet never becomes healthy', async () => {
    const op = await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', '1.36.0'], 1);
    expect(op).toMatchObject({ state: 'rolled_back', from: 'kube1', to: 'kube2' });
    expect(op.error?.code).toBe('VERIFY_FAILED');
    expect(op.result).toMatchObject({ switchOrder: 'standby' });
    // kube1 never stopped booting: only its kubelet and containerd came back.
    const steps = (op.result?.rollback as Array<{ step: string; ok: boolean }>).map((s) => s.step);
    expect(steps.slice(0, 4)).toEqual([
      'stop services in kube2',
      'start services in kube1',
      'verify kube1',
      'stop kube2',
    ]);
    await expectNode(node, { active: 'kube1', version: '1.34.0', image: node.image('v1') });
  });

  it('standby order: a kube2 that cannot boot fails before the node goes down; kube1 never stopped', async () => {
    const op = await node.agentctlJson<OperationJson>(['update', '--image', node.image('noboot')], 1);
    expect(op).toMatchObject({ state: 'failed', from: 'kube1', to: 'kube2' });
    expect(op.error?.code).toBe('MACHINE_START_FAILED');
    expect(op.error?.message).toContain('the node: kube1 serves');
    const standby = op.phases.find((p) => p.name === 'standby');
    expect(standby?.state).toBe('failed');
    expect(standby?.error?.message).toMatch(/machinectl start kube2/);
    expect(op.phases.find((p) => p.name === 'stop')?.state).toBe('skipped');
    await expectNode(node, { active: 'kube1', version: '1.34.0', image: node.image('v1') });
  });

  describe('in the cold order (--switch-order cold)', () => {
    beforeAll(async () => {
      await setSwitchOrder(node, 'cold');
      await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
      await node.waitReady();
    }, 120_000);

    afterAll(async () => {
      await setSwitchOrder(node, 'standby');
      await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
      await node.waitReady();
    }, 120_000);

    it('rolls back to kube1 when kube2s kubelet never becomes healthy', async () => {
      const op = await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', '1.36.0'], 1);
      expect(op).toMatchObject({ state: 'rolled_back', from: 'kube1', to: 'kube2' });
      expect(op.error?.code).toBe('VERIFY_FAILED');
      expect(op.result).toMatchObject({ switchOrder: 'cold' });
      await expectNode(node, { active: 'kube1', version: '1.34.0', image: node.image('v1') });
    });

    it('rolls back to kube1 when kube2 cannot boot', async () => {
      const op = await node.agentctlJson<OperationJson>(['update', '--image', node.image('noboot')], 1);
      expect(op).toMatchObject({ state: 'rolled_back', from: 'kube1', to: 'kube2' });
      // A machine without init fails `machinectl start` at once: no wait for the start timeout.
      const start = op.phases.find((p) => p.name === 'start');
      expect(start?.state).toBe('failed');
      expect(start?.error?.message).toMatch(/machinectl start kube2/);
      expect(start?.error?.message).not.toMatch(/did not answer/);
      await expectNode(node, { active: 'kube1', version: '1.34.0', image: node.image('v1') });
    });
  });

  it('an update cancelled while it provisions kube2 leaves kube1 serving and nothing of kube2', async () => {
    const started = await node.agentctlJson<OperationJson>([
      'update',
      '--kubernetes-version',
      '1.34.1',
      '--detach',
    ]);
    const get = (): Promise<OperationJson> => node.agentctlJson<OperationJson>(['ops', 'get', started.id]);
    // Cancel once kube2's files are being made: well before the switch-over, which refuses it.
    const deadline = Date.now() + 60_000;
    for (let op = await get(); ; op = await get()) {
      if (op.phases.find((p) => p.name === 'provision')?.state === 'running') break;
      expect(op.state, `the update got past provision before it could be cancelled`).toBe('running');
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 50));
    }
    await node.agentctlJson(['ops', 'cancel', started.id]);
    let op = await get();
    while (op.state === 'running') {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 200));
      op = await get();
    }
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'cancelled', from: 'kube1', to: 'kube2' });
    expect(op.phases.find((p) => p.name === 'stop')?.state).not.toBe('succeeded');
    await expectNode(node, { active: 'kube1', version: '1.34.0', image: node.image('v1') });
    // No download cut short is left in the caches (blobs `.tmp-*`, artifacts `.*.partial-*`).
    const partial = await node.host.execOk([
      'find',
      '/var/lib/agentd',
      '(',
      '-name',
      '.tmp-*',
      '-o',
      '-name',
      '.*.partial-*',
      ')',
    ]);
    expect(partial.stdout).toBe('');
  });
});
