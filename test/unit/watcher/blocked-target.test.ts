import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Machine } from '../../../src/kube/index.js';
import {
  BLOCKED_TARGET_FILE,
  blocksRequest,
  createBlockedTargetFile,
  describeBlock,
} from '../../../src/watcher/blocked-target.js';
import type { BlockedTarget } from '../../../src/watcher/blocked-target.js';
import { sameGoalSet } from '../../../src/watcher/machine-goal.js';
import { silentLogger } from './rpc-stub.js';

const block: BlockedTarget = {
  version: 1,
  machineUid: 'uid-1',
  repaveCounter: 3,
  target: { kubernetesVersion: '1.35.0', nodeLabels: { a: '1', b: '2' }, registerWithTaints: ['x', 'y'] },
  operationId: 'op-9',
  outcome: 'rolled_back',
  code: 'HEALTH_GATE_FAILED',
  message: 'node-ready: not Ready',
  since: '2026-11-25T18:00:00.000Z',
};

function machine(uid: string, counter: number): Machine {
  return {
    metadata: { name: 'w1', uid, generation: 5 },
    spec: { operations: { repaveCounter: counter } },
  } as unknown as Machine;
}

describe('blocksRequest', () => {
  it('matches the same Machine uid, counter and target; labels as a map, taints as a set', () => {
    const same = {
      kubernetesVersion: '1.35.0',
      nodeLabels: { b: '2', a: '1' },
      registerWithTaints: ['y', 'x'],
    };
    expect(blocksRequest(block, machine('uid-1', 3), same)).toBe(true);
    expect(blocksRequest(block, machine('uid-1', 4), same)).toBe(false);
    expect(blocksRequest(block, machine('uid-2', 3), same)).toBe(false);
    expect(blocksRequest(block, machine('uid-1', 3), { ...same, kubernetesVersion: '1.35.1' })).toBe(false);
    expect(blocksRequest(block, machine('uid-1', 3), { ...same, image: 'img:v2' })).toBe(false);
    expect(sameGoalSet({ nodeLabels: {} }, {})).toBe(false);
  });

  it('says why the target is not applied', () => {
    expect(describeBlock(block)).toBe(
      'update op-9 rolled back (HEALTH_GATE_FAILED): not applied again until the Machine asks anew (a new spec.operations.repaveCounter or a different target)',
    );
  });
});

describe('createBlockedTargetFile', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-blocked-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes, reads back in a new store, and clears', async () => {
    const store = createBlockedTargetFile(dir, silentLogger);
    expect(await store.read()).toBeNull();
    await store.write(block);
    expect(await createBlockedTargetFile(dir, silentLogger).read()).toEqual(block);
    await store.write(null);
    expect(await store.read()).toBeNull();
    expect(await createBlockedTargetFile(dir, silentLogger).read()).toBeNull();
    await store.write(null);
  });

  it('ignores a record that is not valid (and does not throw)', async () => {
    await writeFile(path.join(dir, BLOCKED_TARGET_FILE), '{"version":1,"machineUid":');
    expect(await createBlockedTargetFile(dir, silentLogger).read()).toBeNull();
    await writeFile(path.join(dir, BLOCKED_TARGET_FILE), JSON.stringify({ ...block, outcome: 'cancelled' }));
    expect(await createBlockedTargetFile(dir, silentLogger).read()).toBeNull();
    expect(await readFile(path.join(dir, BLOCKED_TARGET_FILE), 'utf8')).toContain('cancelled');
  });
});
