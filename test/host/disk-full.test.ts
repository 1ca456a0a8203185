/**
 * A full disk on a real systemd host (docs/operations.md, "A full disk, exhausted descriptors";
 * issue 40): /var/lib/agentd is a small tmpfs of its own, filled to ENOSPC while a failing
 * update (kubelet 1.36.x never turns healthy) is in `verify`. The rollback still brings kube1
 * back — running, verified, the only machine — and the update says so; once space returns its
 * record is written with its true end, and the next update works.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNode, type OperationJson, type StatusJson } from '../support/real-host/assert-node.js';
import { startJoinedNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!requireRealHost())('a full disk on a real systemd host', { timeout: 300_000 }, () => {
  let node: RealNode;

  beforeAll(async () => {
    node = await startJoinedNode({ label: 'disk-full', unhealthyKubelet: '^1\\.36\\.' });
    // /var/lib/agentd on a tmpfs of its own: what it holds now and room for an update's downloads.
    await node.host.execOk(['systemctl', 'stop', 'agentd.service']);
    await node.host.execOk([
      'bash',
      '-c',
      [
        'set -e',
        'used=$(du -sb /var/lib/agentd | cut -f1)',
        'mv /var/lib/agentd /var/lib/agentd.aside',
        'mkdir -m 0700 /var/lib/agentd',
        'mount -t tmpfs -o size=$((used * 2 + 64 * 1024 * 1024)),mode=0700 tmpfs /var/lib/agentd',
        'cp -a /var/lib/agentd.aside/. /var/lib/agentd/',
        'rm -rf /var/lib/agentd.aside',
      ].join('; '),
    ]);
    await node.host.execOk(['systemctl', 'start', 'agentd.service']);
    await node.waitReady();
  }, 600_000);

  afterAll(async () => {
    await node?.stop();
  }, 120_000);

  const get = (id: string): Promise<OperationJson> => node.agentctlJson<OperationJson>(['ops', 'get', id]);

  it('the disk fills during verify of a failing update: kube1 serves again', async () => {
    const started = await node.agentctlJson<OperationJson>([
      'update',
      '--kubernetes-version',
      '1.36.0',
      '--detach',
    ]);
    const deadline = Date.now() + 120_000;
    for (let op = await get(started.id); ; op = await get(started.id)) {
      if (op.phases.find((p) => p.name === 'verify')?.state === 'running') break;
      expect(op.state, 'the update ended before verify').toBe('running');
      expect(Date.now()).toBeLessThan(deadline);
      await delay(100);
    }
    // Fill /var/lib/agentd to ENOSPC (dd ends with "No space left on device").
    for (const bs of ['1M', '4k']) {
      const dd = await node.host.exec([
        'dd',
        'if=/dev/zero',
        'of=/var/lib/agentd/fill',
        `bs=${bs}`,
        'oflag=append',
        'conv=notrunc',
      ]);
      expect(dd.stderr).toMatch(/No space left on device/);
    }
    let op = await get(started.id);
    while (op.state === 'running') {
      expect(Date.now()).toBeLessThan(deadline);
      await delay(200);
      op = await get(started.id);
    }
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'rolled_back', from: 'kube1', to: 'kube2' });
    expect(op.error?.code).toBe('VERIFY_FAILED');
    expect(op.error?.message).toContain('the node: kube1 serves');
    // While the disk is full, status says what agentd owes.
    const full = await node.agentctlJson<StatusJson>(['status']);
    expect(full.node.warnings.join('\n')).toMatch(
      /is not written yet|reserve for rollback and recovery is not whole/,
    );

    // Space returns: the record is written with its true end, and nothing is owed any more.
    await node.host.execOk(['rm', '-f', '/var/lib/agentd/fill']);
    for (;;) {
      const status = await node.agentctlJson<StatusJson>(['status']);
      const disk = await node.host.exec(['cat', `/var/lib/agentd/operations/${started.id}.json`]);
      const onDisk = disk.exitCode === 0 ? (JSON.parse(disk.stdout) as OperationJson) : null;
      if (status.node.warnings.length === 0 && onDisk?.state === 'rolled_back') break;
      expect(Date.now(), JSON.stringify(status.node.warnings)).toBeLessThan(deadline);
      await delay(200);
    }
    await expectNode(node, { active: 'kube1', version: '1.34.0', image: node.image('v1') });

    const next = await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', '1.34.1']);
    expect(next, JSON.stringify(next.error)).toMatchObject({ state: 'succeeded', to: 'kube2' });
    await expectNode(node, { active: 'kube2', version: '1.34.1', image: node.image('v1') });
  });
});
