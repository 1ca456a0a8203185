/**
 * Updates that change nothing (docs/api.md, issue 4): a dry run returns the plan and leaves the
 * host and the state dir byte-for-byte as they were; an update to the applied config is a
 * no-op (`result.changed=false`) that touches no machine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  JOIN_VERSION,
  NEW_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  expectSingleMachine,
  treeDigest,
  type Op,
  type SimNode,
} from '../support/sim-node.js';

/** Every file under the node's root and state dir (the operation history included). */
async function digestAll(node: SimNode, skipState: (rel: string) => boolean = () => false) {
  return { root: await treeDigest(node.root), state: await treeDigest(node.stateDir, skipState) };
}

describe('updates that change nothing', () => {
  let template: SimNode;
  beforeAll(async () => {
    template = await createJoinedTemplate();
  });
  afterAll(async () => {
    await disposeSimNode(template);
  });

  it('dry run: the plan lists phases and changes; root and state dir unchanged byte for byte', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    // Nothing is excluded: a dry run records no operation, writes no journal and runs no
    // command that changes the host; the daemon's logs go to stdout, not into these dirs.
    const before = await digestAll(node);
    expect(before.root.size, 'the digest covers the joined machine').toBeGreaterThan(20);
    const opsBefore = await node.operations();

    const op = await node.update({ dryRun: true, set: { kubernetesVersion: NEW_VERSION } });
    expect(op.state).toBe('succeeded');
    expect(op).toMatchObject({ from: 'kube1', to: 'kube2' });
    const plan = op.result?.plan as {
      from: string;
      to: string;
      changes: Array<{ path: string; from: unknown; to: unknown }>;
      phases: string[];
      files: string[];
      removes: string[];
      configHash: string;
    };
    expect(op.result?.dryRun).toBe(true);
    expect(op.result?.changed).toBe(true);
    expect(plan.changes).toEqual([{ path: 'Cluster.Version', from: JOIN_VERSION, to: NEW_VERSION }]);
    expect(plan.phases).toEqual([
      'preflight',
      'provision',
      'stage',
      'standby',
      'stop',
      'start',
      'verify',
      'commit',
      'cleanup',
    ]);
    expect(plan.files).toEqual(expect.arrayContaining([expect.stringContaining('kube2')]));
    expect(plan.removes).toEqual(
      expect.arrayContaining([node.machineDir('kube1'), node.appliedConfig('kube1')]),
    );
    expect(plan.configHash).toMatch(/^[0-9a-f]{64}$/);

    expect(await digestAll(node)).toEqual(before);
    expect(await node.operations()).toEqual(opsBefore);
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
  });

  it('dry run of an update to the applied config: changed=false and an empty plan', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const before = await digestAll(node);
    const op = await node.update({ dryRun: true });
    expect(op.result).toMatchObject({ dryRun: true, changed: false, plan: { changes: [], phases: [] } });
    expect(await digestAll(node)).toEqual(before);
  });

  it('no-op: an update to the applied config succeeds with changed=false and touches no machine', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    // The no-op is recorded in the history (operations/); everything else stays as it was.
    const skipHistory = (rel: string): boolean => rel === 'operations';
    const before = await digestAll(node, skipHistory);

    const op = await node.update({ wait: true, set: { kubernetesVersion: JOIN_VERSION } });
    expect(op).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube1', phases: [] });
    expect(op.result?.changed).toBe(false);
    const bare = await node.update({ wait: true });
    expect(bare.result?.changed).toBe(false);

    expect(await digestAll(node, skipHistory)).toEqual(before);
    const recorded = await node.call<Op>('operations.get', { id: op.id });
    expect(recorded.result?.changed).toBe(false);
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
  });
});
