/**
 * Cancelling an update (docs/api.md, docs/architecture.md, issue 4): before the source stops, cancel undoes the
 * target and the node keeps serving on kube1 (`cancelled`); once the switch-over has begun,
 * cancel is refused with PRECONDITION_FAILED and the update completes.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { holdImagePulls } from '../support/holding-registry.js';
import {
  JOIN_VERSION,
  NEW_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  expectSingleMachine,
  followEvents,
  waitFor,
  type Op,
  type SimNode,
} from '../support/sim-node.js';

describe('cancel', () => {
  let template: SimNode;
  beforeAll(async () => {
    template = await createJoinedTemplate();
  });
  afterAll(async () => {
    await disposeSimNode(template);
  });

  it('before stop (in provision): cancelled, kube2 removed, the node unchanged on kube1', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const registry = await holdImagePulls(node);
    const appliedBefore = await readFile(node.appliedConfig('kube1'));

    const op = await node.update({ set: { image: registry.image } });
    await registry.blobRequested; // provision is pulling the rootfs into kube2
    const cancelling = await node.call<Op>('operations.cancel', { id: op.id });
    expect(cancelling.id).toBe(op.id);

    const done = await node.call<Op>('operations.wait', { id: op.id });
    expect(done.state, JSON.stringify(done.error)).toBe('cancelled');
    expect(done.error?.code).toBe('CANCELLED');
    expect(Object.fromEntries(done.phases.map((p) => [p.name, p.state]))).toMatchObject({
      preflight: 'succeeded',
      provision: 'cancelled',
      stage: 'skipped',
      stop: 'skipped',
      start: 'skipped',
    });
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
    expect(await readFile(node.appliedConfig('kube1'))).toEqual(appliedBefore);
    expect(await node.readJournal()).toMatchObject({
      operationId: op.id,
      closed: true,
      outcome: 'cancelled',
      sourceStopped: false,
    });
  });

  it('after stop: refused with PRECONDITION_FAILED, and the update completes', async () => {
    const node = await cloneSimNode(template);
    // Every host command on kube1 takes 200 ms: stopping it (and later removing it) takes a
    // while, so the cancel surely arrives while the operation runs past its point of no return.
    await node.start({ faults: 'latency=200:kube1' });
    const events = await followEvents(node.socket);
    onTestFinished(() => events.close());

    const op = await node.update({ set: { kubernetesVersion: NEW_VERSION } });
    await events.next((e) => e.operationId === op.id && e.phase === 'stop' && e.state === 'running');
    // The journal records the point of no return right after the phase starts.
    await waitFor('the journal to say the source is stopping', async () => {
      const j = await node.readJournal();
      return j.operationId === op.id && j.sourceStopped === true;
    });
    const refused = await node.callError('operations.cancel', { id: op.id });
    expect(refused.data).toMatchObject({ code: 'PRECONDITION_FAILED', phase: expect.any(String) });
    expect(refused.message).toContain('point of no return');

    const done = await node.call<Op>('operations.wait', { id: op.id });
    expect(done.state, JSON.stringify(done.error)).toBe('succeeded');
    await expectSingleMachine(node, { active: 'kube2', version: NEW_VERSION });
  });
});
