/**
 * One mutating operation at a time (docs/api.md, issue 4): concurrent `update` calls over the
 * socket start exactly one operation and the others get BUSY naming it; an idempotency key
 * seen before returns that operation instead of starting another.
 */
import { rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  NEW_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  expectSingleMachine,
  type Op,
  type SimNode,
  type WireError,
} from '../support/sim-node.js';

describe('concurrent updates and idempotency', () => {
  let template: SimNode;
  beforeAll(async () => {
    template = await createJoinedTemplate();
  });
  afterAll(async () => {
    await disposeSimNode(template);
  });

  it('five updates at once: exactly one runs, the other four get BUSY naming it', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const before = (await node.operations()).length;
    const versions = ['1.35.0', '1.35.1', '1.35.2', '1.36.0', '1.36.1'];
    const answers = await Promise.all(
      versions.map((v) => node.rpc('update', { set: { kubernetesVersion: v } })),
    );
    const started = answers.filter((a) => a.result !== undefined).map((a) => a.result as Op);
    const refused = answers.filter((a) => a.error !== undefined).map((a) => a.error as WireError);
    expect(started).toHaveLength(1);
    const op = started[0]!;
    expect(refused).toHaveLength(4);
    for (const err of refused) {
      expect(err.data).toMatchObject({ code: 'BUSY', operation: op.id, kind: 'update' });
    }
    const done = await node.call<Op>('operations.wait', { id: op.id });
    expect(done.state).toBe('succeeded');
    expect((await node.operations()).length).toBe(before + 1);
    const version = (done.result?.changes as Array<{ path: string; to: string }>)[0]?.to ?? '';
    await expectSingleMachine(node, { active: 'kube2', version });
  });

  it('an update while one runs is BUSY; after it ends the next one runs', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const first = await node.update({ set: { kubernetesVersion: NEW_VERSION } });
    const busy = await node.callError('update', { force: true });
    expect(busy.data).toMatchObject({ code: 'BUSY', operation: first.id });
    expect((await node.call<Op>('operations.wait', { id: first.id })).state).toBe('succeeded');
    const second = await node.update({ force: true, wait: true });
    expect(second).toMatchObject({ state: 'succeeded', from: 'kube2', to: 'kube1' });
  });

  it('an update whose first record cannot be written is refused naming the file, and the next one is not BUSY', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    // The history directory is a file now: no operation record can be written under it.
    const history = path.join(node.stateDir, 'operations');
    await rename(history, `${history}.aside`);
    await writeFile(history, 'in the way');
    for (const attempt of [1, 2]) {
      const err = await node.callError('update', { set: { kubernetesVersion: NEW_VERSION } });
      expect(err.data, `attempt ${attempt}`).toMatchObject({ code: 'PRECONDITION_FAILED', errno: 'EEXIST' });
      expect(err.message).toMatch(new RegExp(`^cannot start the update: cannot write ${history}/op-`));
      const { operation } = await node.status();
      expect(operation, `attempt ${attempt}: nothing runs`).toBeNull();
    }
    await rm(history);
    await rename(`${history}.aside`, history);
    const op = await node.update({ set: { kubernetesVersion: NEW_VERSION }, wait: true });
    expect(op.state).toBe('succeeded');
    // The refused attempts are not in the history.
    expect((await node.operations()).filter((o) => o.kind === 'update')).toHaveLength(2);
  });

  it('the same idempotency key returns the same operation, running or ended', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const key = 'machine-uid-1/generation-2/counter-3';
    const first = await node.update({ set: { kubernetesVersion: NEW_VERSION }, idempotencyKey: key });
    // While it runs: the same operation, not BUSY.
    const again = await node.update({ set: { kubernetesVersion: NEW_VERSION }, idempotencyKey: key });
    expect(again.id).toBe(first.id);
    // Waiting on the replay waits for the original.
    const ended = await node.update({
      set: { kubernetesVersion: NEW_VERSION },
      idempotencyKey: key,
      wait: true,
    });
    expect(ended).toMatchObject({ id: first.id, state: 'succeeded', idempotencyKey: key });
    // After it ended, even with other params: the key wins, nothing new starts.
    const replay = await node.update({ set: { kubernetesVersion: '1.36.0' }, idempotencyKey: key });
    expect(replay).toMatchObject({ id: first.id, state: 'succeeded' });
    const ops = await node.operations();
    expect(ops.filter((o) => o.idempotencyKey === key).map((o) => o.id)).toEqual([first.id]);
    expect(ops.filter((o) => o.kind === 'update')).toHaveLength(2); // the join and this one
    await expectSingleMachine(node, { active: 'kube2', version: NEW_VERSION });
  });

  it('concurrent calls with the same idempotency key all get the one operation', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const key = 'same-key-at-once';
    const ops = await Promise.all(
      [0, 1, 2].map(() => node.update({ set: { kubernetesVersion: NEW_VERSION }, idempotencyKey: key })),
    );
    expect(new Set(ops.map((o) => o.id)).size).toBe(1);
    const done = await node.call<Op>('operations.wait', { id: ops[0]!.id });
    expect(done.state).toBe('succeeded');
    expect((await node.operations()).filter((o) => o.idempotencyKey === key)).toHaveLength(1);
  });
});
