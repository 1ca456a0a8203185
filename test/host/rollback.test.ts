/**
 * Rollback on real systemd: a target whose kubelet never turns healthy, and a target machine
 * that cannot boot (its image has no init), both end `rolled_back` with the source machine
 * running and verified again, and nothing of the target left.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNode, type OperationJson } from '../support/real-host/assert-node.js';
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

  it('rolls back to kube1 when kube2s kubelet never becomes healthy', async () => {
    const op = await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', '1.36.0'], 1);
    expect(op).toMatchObject({ state: 'rolled_back', from: 'kube1', to: 'kube2' });
    expect(op.error?.code).toBe('VERIFY_FAILED');
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
