/**
 * Trust the host over the files (docs/architecture.md, "Recovery checks"; issue 40), on the
 * simulated host: state files that disagree with the machines never cost the node the machine
 * that serves. Each case starts from a node that was updated kube1 → kube2 (kube2 serves, kube1 is
 * gone) or from a node joined on kube1, then edits a state file as a stale backup or a careless
 * operator would.
 */
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  JOIN_VERSION,
  NEW_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  exists,
  expectSingleMachine,
  type SimNode,
} from '../support/sim-node.js';

const nodeJson = (active: string): string =>
  `${JSON.stringify({ activeMachine: active, updatedAt: '2026-01-01T00:00:00.000Z' })}\n`;

function openJournal(o: { source: string | null; target: string | null; committed: boolean }): string {
  return `${JSON.stringify({
    version: 1,
    operationId: 'op-stale-journal',
    kind: 'update',
    ...o,
    phase: o.committed ? 'cleanup' : 'verify',
    phaseState: 'running',
    sourceStopped: true,
    cordonedByUs: false,
    targetHash: null,
    closed: false,
    outcome: null,
    updatedAt: '2026-01-01T00:00:00.000Z',
  })}\n`;
}

describe('state files that disagree with the host', () => {
  let joined: SimNode;
  let onKube2: SimNode;
  beforeAll(async () => {
    joined = await createJoinedTemplate();
    onKube2 = await cloneSimNode(joined);
    await onKube2.start();
    const op = await onKube2.update({ wait: true, set: { kubernetesVersion: NEW_VERSION } });
    expect(op.state).toBe('succeeded');
    await onKube2.stop();
  });
  afterAll(async () => {
    await disposeSimNode(joined);
    await disposeSimNode(onKube2);
  });

  it('node.json naming kube1 while kube2 serves: a failing update is refused, kube2 keeps serving', async () => {
    const node = await cloneSimNode(onKube2);
    await writeFile(path.join(node.stateDir, 'node.json'), nodeJson('kube1'));
    // Before issue 40 this update stopped and removed kube2, "the target", with its applied config.
    await node.start({ faults: 'kubelet-inactive:kube1' });
    const err = await node.callError('update', { wait: true, set: { kubernetesVersion: '1.35.1' } });
    expect(err.data.code).toBe('STATE_CONFLICT');
    expect(err.message).toContain(
      'node.json names kube1 as the active machine, but the host has no machine kube1 and kube2 runs and serves',
    );
    expect(err.data).toMatchObject({ file: 'node.json', host: { kube1: 'absent', kube2: 'serving' } });
    const { node: status } = await node.status();
    expect(status.machines.filter((m) => m.state === 'running')).toEqual([
      { name: 'kube2', state: 'running', kubelet: 'active' },
    ]);
    // status says which file disagrees with what, and what agentd does about it: node.json
    // with the host, and with the journal of the update that committed kube2.
    expect(status.warningDetails.filter((w) => w.code === 'state-conflict')).toEqual([
      expect.objectContaining({
        file: 'node.json',
        against: 'host',
        machine: 'kube2',
        action: expect.stringContaining('agentd refuses every update (STATE_CONFLICT)'),
      }),
      expect.objectContaining({ file: 'journal.json', against: 'node.json', machine: 'kube2' }),
    ]);
    expect((await node.readVerifiedApplied('kube2')).Cluster.Version).toBe(NEW_VERSION);
    // Moving node.json aside, as the message says, lets agentd decide from the host.
    await node.stop();
    await rm(path.join(node.stateDir, 'node.json'));
    await node.start();
    await expectSingleMachine(node, { active: 'kube2', version: NEW_VERSION });
    const op = await node.update({ wait: true, set: { kubernetesVersion: '1.35.1' } });
    expect(op.state, JSON.stringify(op.error)).toBe('succeeded');
    await expectSingleMachine(node, { active: 'kube1', version: '1.35.1' });
  });

  it('node.json naming kube1 while kube1 is stopped and kube2 serves: refused too, nothing stopped', async () => {
    const node = await cloneSimNode(onKube2);
    // A kube1 rootfs left on disk (a stopped machine) and a node.json naming it.
    await writeFile(path.join(node.stateDir, 'node.json'), nodeJson('kube1'));
    const { mkdir } = await import('node:fs/promises');
    await mkdir(path.join(node.machineDir('kube1'), 'etc'), { recursive: true });
    await node.start();
    const err = await node.callError('update', { wait: true, set: { kubernetesVersion: '1.35.1' } });
    expect(err.data.code).toBe('STATE_CONFLICT');
    expect(err.message).toContain('kube1 is stopped and kube2 runs and serves');
    expect((await node.status()).node.warningDetails).toContainEqual(
      expect.objectContaining({
        code: 'state-conflict',
        file: 'node.json',
        message: expect.stringContaining('kube1 is stopped and kube2 runs and serves'),
      }),
    );
    expect((await node.status()).node.machines.find((m) => m.name === 'kube2')).toMatchObject({
      state: 'running',
      kubelet: 'active',
    });
  });

  it('node.json naming a machine without an applied config: refused, naming node.json', async () => {
    const node = await cloneSimNode(joined);
    await rm(node.appliedConfig('kube1'));
    await rm(`${node.appliedConfig('kube1')}.sha256`);
    await node.start();
    const err = await node.callError('update', { wait: true, set: { kubernetesVersion: NEW_VERSION } });
    expect(err.data.code).toBe('STATE_CONFLICT');
    expect(err.message).toContain(
      'node.json names kube1 as the active machine, but kube1 has no applied config',
    );
    expect((await node.status()).node.warningDetails).toContainEqual(
      expect.objectContaining({ code: 'state-conflict', file: 'node.json', against: 'applied-config' }),
    );
    expect((await node.status()).node.machines.find((m) => m.name === 'kube1')?.state).toBe('running');
  });

  it('a closed journal that committed kube2 against a node.json naming kube1: names both files', async () => {
    const node = await cloneSimNode(onKube2);
    await writeFile(path.join(node.stateDir, 'node.json'), nodeJson('kube1'));
    await node.start();
    const err = await node.callError('update', { wait: true, force: true });
    expect(err.data.code).toBe('STATE_CONFLICT');
    expect(err.message).toContain(
      'journal.json says the last update committed kube2, but node.json names kube1',
    );
    expect((await node.status()).node.warningDetails).toContainEqual(
      expect.objectContaining({ code: 'state-conflict', file: 'journal.json', against: 'node.json' }),
    );
  });

  it('an open journal naming a source that does not exist: recovery keeps kube2, which serves', async () => {
    const node = await cloneSimNode(onKube2);
    await writeFile(node.journalFile, openJournal({ source: 'kube1', target: 'kube2', committed: false }));
    // Before issue 40 recovery stopped and removed kube2 first, then failed to start kube1.
    await node.start();
    // The journal disagreed with the host, and status says what recovery did about it.
    await expectSingleMachine(node, { active: 'kube2', version: NEW_VERSION, warnings: ['state-conflict'] });
    expect((await node.status()).node.warningDetails).toEqual([
      expect.objectContaining({
        file: 'journal.json',
        against: 'host',
        machine: 'kube2',
        action: 'startup recovery kept kube2, which serves, and started, stopped or removed no machine',
      }),
    ]);
    expect(await node.readJournal()).toMatchObject({
      closed: true,
      outcome:
        'interrupted: kept kube2, which serves: the open journal names kube1 as the source, but the host has no machine kube1 and no applied config of it',
    });
    const op = await node.update({ wait: true, set: { kubernetesVersion: '1.35.1' } });
    expect(op.state, JSON.stringify(op.error)).toBe('succeeded');
  });

  it('an open journal naming a committed target that does not exist: recovery keeps kube1, which serves', async () => {
    const node = await cloneSimNode(joined);
    await writeFile(node.journalFile, openJournal({ source: 'kube1', target: 'kube2', committed: true }));
    await node.start();
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION, warnings: ['state-conflict'] });
    expect(await exists(node.machineDir('kube1'))).toBe(true);
    expect((await node.readJournal()).outcome).toContain('interrupted: kept kube1, which serves');
  });
});
