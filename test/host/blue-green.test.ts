/**
 * Blue/green on real systemd: agentd installed as an operator would, running as agentd.service
 * with `--host systemd` in a real systemd host, provisions real nspawn machines from a real
 * registry. Join (kube1), switch to kube2 with another version and image (whose top layer is
 * zstd-compressed), back to kube1, no-op.
 * Then the node check: it asks machined and the machines' systemd over D-Bus, agrees with what
 * the commands say, and sees a kubelet stopped behind agentd's back: in the next `status` past
 * 1 s, and in repair, which starts it again. Through all of it, at debug level, agentd's
 * journal never holds the node's bootstrap token.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BOOTSTRAP_TOKEN } from '../support/agent-config.js';
import { requireRealHost } from '../support/real-host/require.js';
import { MACHINE_REPOSITORY, REGISTRY, startRealNode, type RealNode } from '../support/real-host/node.js';
import { runOk } from '../support/real-host/run.js';
import { expectNode, type OperationJson, type StatusJson } from '../support/real-host/assert-node.js';

/** The commands agentd's node check would run without D-Bus (src/host/machines.ts, `inspect`). */
const CHECK_COMMAND = /^(machinectl show |systemctl '--machine=kube[12]' is-active )/;

describe.skipIf(!requireRealHost())('blue/green on a real systemd host', { timeout: 180_000 }, () => {
  let node: RealNode;

  beforeAll(async () => {
    // Debug lines name every host command agentd runs: the node check must run none.
    node = await startRealNode({ label: 'bluegreen', extraConfig: 'logLevel: debug\n' });
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

  it('switches to kube2 with another version and an image with a zstd layer, and removes kube1', async () => {
    // The registry serves v2's top layer as it was pushed: zstd (test/support/real-host/images.ts).
    const [curl, ...args] = node.host.inNetns([
      'curl',
      '-sf',
      '-H',
      'Accept: application/vnd.oci.image.manifest.v1+json',
      `http://${REGISTRY}/v2/${MACHINE_REPOSITORY}/manifests/v2`,
    ]);
    const manifest = JSON.parse((await runOk(curl as string, args)).stdout) as {
      layers: Array<{ mediaType: string }>;
    };
    expect(manifest.layers.map((l) => l.mediaType)).toContain('application/vnd.oci.image.layer.v1.tar+zstd');
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

  /** The host commands agentd ran since the journal cursor `cursor` (its debug lines). */
  const commandsSince = async (cursor: string): Promise<string[]> => {
    const res = await node.host.execOk([
      'journalctl',
      '-u',
      'agentd.service',
      '--no-pager',
      '-q',
      '-o',
      'cat',
      `--after-cursor=${cursor}`,
    ]);
    return res.stdout
      .split('\n')
      .filter((l) => l.includes('"host command finished"'))
      .map((l) => String((JSON.parse(l) as { command?: string }).command));
  };
  const agentdCursor = async (): Promise<string> => {
    const res = await node.host.execOk([
      'journalctl',
      '-u',
      'agentd.service',
      '-n',
      '0',
      '--show-cursor',
      '-q',
    ]);
    const cursor = /-- cursor: (.+)/.exec(res.stdout)?.[1]?.trim();
    expect(cursor, res.stdout).toBeTruthy();
    return cursor as string;
  };

  it('checks the node over D-Bus: the same answers as the commands, and not one command run', async () => {
    const cursor = await agentdCursor();
    // A no-op operation: the node is read again when it ends.
    expect(
      await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', '1.34.1']),
    ).toMatchObject({
      state: 'succeeded',
    });
    const status = await node.agentctlJson<StatusJson>(['status']);
    for (const m of ['kube1', 'kube2'] as const) {
      const registered = (await node.host.exec(['machinectl', 'show', m])).exitCode === 0;
      const word = (
        await node.host.exec(['systemctl', `--machine=${m}`, 'is-active', 'kubelet.service'])
      ).stdout.trim();
      const seen = status.node.machines.find((x) => x.name === m);
      if (registered) expect(seen, m).toMatchObject({ state: 'running', kubelet: word });
      else expect(seen, m).toMatchObject({ state: 'absent', kubelet: 'inactive' });
    }
    expect(status.node.machines.map((x) => x.state)).toEqual(['running', 'absent']);
    expect((await commandsSince(cursor)).filter((c) => CHECK_COMMAND.test(c))).toEqual([]);
    const journal = await node.journal(5000);
    expect(journal).toContain('node checks ask machined and the machines’ systemd over D-Bus');
    expect(journal).not.toContain('D-Bus could not answer');
  });

  it(
    'sees a kubelet stopped behind its back, over D-Bus, in the next status and in repair, which starts it again',
    { timeout: 120_000 },
    async () => {
      const cursor = await agentdCursor();
      await node.host.execOk(['systemctl', '--machine=kube1', 'stop', 'kubelet.service']);
      // Past 1 s after anything agentd read, a status reads the node before it answers.
      const stoppedAt = Date.now();
      await delay(1200);
      const first = await node.agentctlJson<StatusJson>(['status']);
      // Repair's own check (every 30 s) may come first, within the 1.2 s: while its operation runs
      // the node is not read, and once it has ended kubelet runs again. Either is seen as such.
      const repairedSince =
        first.lastOperation?.kind === 'repair' && Date.parse(first.lastOperation.createdAt) >= stoppedAt;
      if (first.operation !== null) expect(first.operation.kind).toBe('repair');
      else if (!repairedSince) {
        expect(Date.parse(first.node.observedAt ?? '')).toBeGreaterThanOrEqual(stoppedAt);
        expect(first.node.serving).toBe(false);
        expect(first.node.machines.find((x) => x.name === 'kube1')).toMatchObject({ kubelet: 'inactive' });
      }
      // Repair checks every 30 s; give it two checks and the repair itself.
      const deadline = Date.now() + 90_000;
      let status: StatusJson;
      for (;;) {
        status = await node.agentctlJson<StatusJson>(['status']);
        if (status.lastOperation?.kind === 'repair' && status.lastOperation.state !== 'running') break;
        if (Date.now() > deadline) throw new Error(`no repair in 90 s\n${await node.journal()}`);
        await delay(1000);
      }
      expect(status.lastOperation, JSON.stringify(status.lastOperation?.error)).toMatchObject({
        kind: 'repair',
        state: 'succeeded',
        to: 'kube1',
      });
      const word = await node.host.exec(['systemctl', '--machine=kube1', 'is-active', 'kubelet.service']);
      expect(word.stdout.trim()).toBe('active');
      expect((await commandsSince(cursor)).filter((c) => CHECK_COMMAND.test(c))).toEqual([]);
    },
  );

  it('never writes the bootstrap token to its journal, at debug level, through all of the above', async () => {
    const journal = (
      await node.host.execOk(['journalctl', '-u', 'agentd.service', '--no-pager', '-o', 'cat'])
    ).stdout;
    // Joins, switches and repairs were logged (this is the journal of all of them).
    expect(journal).toContain('"phase":"commit"');
    // The token's secret half (the part before the dot is its public id).
    const secret = TEST_BOOTSTRAP_TOKEN.split('.')[1]!;
    expect(journal.includes(secret), 'the bootstrap token is in agentd’s journal').toBe(false);
  });
});
