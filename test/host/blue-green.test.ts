/**
 * Blue/green on real systemd: agentd installed as an operator would, running as agentd.service
 * with `--host systemd` in a real systemd host, provisions real nspawn machines from a real
 * registry. Join (kube1), switch to kube2 with another version and image, back to kube1, no-op.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireRealHost } from '../support/real-host/require.js';
import { startRealNode, type RealNode } from '../support/real-host/node.js';
import { expectNode, type OperationJson } from '../support/real-host/assert-node.js';

describe.skipIf(!requireRealHost())('blue/green on a real systemd host', { timeout: 180_000 }, () => {
  let node: RealNode;

  beforeAll(async () => {
    node = await startRealNode({ label: 'bluegreen' });
    await node.waitReady();
  }, 600_000);

  afterAll(async () => {
    await node?.stop();
  }, 120_000);

  it('joins from nothing: kube1 runs, verified, with its applied config', async () => {
    const config = node.agentConfig();
    const op = await node.agentctlJson<OperationJson>(['update', '--config', await node.configFile(config)]);
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
    await expectNode(node, { active: 'kube1', version: '1.34.0', image: node.image('v1') });
  });

  it('switches to kube2 with another version and image, and removes kube1', async () => {
    const op = await node.agentctlJson<OperationJson>([
      'update',
      '--kubernetes-version',
      '1.35.0',
      '--image',
      node.image('v2'),
    ]);
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube2' });
    await expectNode(node, { active: 'kube2', version: '1.35.0', image: node.image('v2') });
    const marker = await node.host.execOk(['cat', '/var/lib/machines/kube2/etc/agentd-test-image']);
    expect(marker.stdout).toBe('v2\n');
  });

  it('switches back to kube1', async () => {
    const op = await node.agentctlJson<OperationJson>([
      'update',
      '--kubernetes-version',
      '1.34.1',
      '--image',
      node.image('v1'),
    ]);
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', from: 'kube2', to: 'kube1' });
    await expectNode(node, { active: 'kube1', version: '1.34.1', image: node.image('v1') });
  });

  it('an update to what runs already is a no-op that touches no machine', async () => {
    const before = await node.host.execOk([
      'systemctl',
      'show',
      '-p',
      'ExecMainStartTimestamp',
      'systemd-nspawn@kube1.service',
    ]);
    const op = await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', '1.34.1']);
    expect(op).toMatchObject({ state: 'succeeded', result: { changed: false } });
    const after = await node.host.execOk([
      'systemctl',
      'show',
      '-p',
      'ExecMainStartTimestamp',
      'systemd-nspawn@kube1.service',
    ]);
    expect(after.stdout).toBe(before.stdout);
    await expectNode(node, { active: 'kube1', version: '1.34.1', image: node.image('v1') });
  });
});
