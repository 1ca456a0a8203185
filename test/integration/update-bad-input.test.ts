/**
 * Bad input (docs/api.md, docs/architecture.md, issue 4): an invalid config, label or taint is refused at the
 * boundary (−32602 naming the field); an image or a Kubernetes version the mirror does not have fails in
 * preflight, before anything is provisioned or stopped — the host untouched.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  JOIN_VERSION,
  cloneSimNode,
  createJoinedTemplate,
  disposeSimNode,
  expectSingleMachine,
  simMachines,
  treeDigest,
  type Op,
  type SimNode,
} from '../support/sim-node.js';

/**
 * The host and state as a failed update may leave them: the operation history and the
 * (closed) journal record the attempt, and the sim's daemon-reload counter counts the undo's
 * reload; everything else — machines, files, caches, node state — must be as before.
 */
async function hostDigest(node: SimNode) {
  return {
    root: await treeDigest(node.root, (rel) => rel === 'var/lib/agentd-sim/state.json'),
    machines: await simMachines(node),
    state: await treeDigest(node.stateDir, (rel) => rel === 'operations' || rel === 'journal.json'),
  };
}

describe('bad input', () => {
  let template: SimNode;
  beforeAll(async () => {
    template = await createJoinedTemplate();
  });
  afterAll(async () => {
    await disposeSimNode(template);
  });

  it('a config without MachineName: −32602 naming the field, nothing recorded or changed', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const config = JSON.parse(await readFile(node.appliedConfig('kube1'), 'utf8')) as Record<string, unknown>;
    delete config.MachineName;
    const before = { root: await treeDigest(node.root), state: await treeDigest(node.stateDir) };

    const err = await node.callError('update', { config, wait: true });
    expect(err.code).toBe(-32602);
    expect(err.message).toContain('MachineName');
    expect(JSON.stringify(err.data)).toContain('MachineName');

    expect({ root: await treeDigest(node.root), state: await treeDigest(node.stateDir) }).toEqual(before);
    expect((await node.operations()).map((o) => o.kind)).toEqual(['update']); // only the join
  });

  it('labels and taints out of Kubernetes syntax: −32602 naming each one, nothing recorded or changed', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const before = { root: await treeDigest(node.root), state: await treeDigest(node.stateDir) };

    const err = await node.callError('update', {
      set: { nodeLabels: { 'bad key': 'v' }, registerWithTaints: ['dedicated=gpu:Sometimes'] },
      wait: true,
    });
    expect(err.code).toBe(-32602);
    expect(err.message).toContain('params.set.nodeLabels.bad key: invalid key: expected a label key');
    const issues = err.data.issues as { path: string; message: string }[];
    expect(issues.map((i) => i.path)).toEqual(['set.nodeLabels.bad key', 'set.registerWithTaints.0']);
    expect(issues[1]?.message).toContain('NoSchedule, PreferNoSchedule, NoExecute');

    expect({ root: await treeDigest(node.root), state: await treeDigest(node.stateDir) }).toEqual(before);
    expect((await node.operations()).map((o) => o.kind)).toEqual(['update']); // only the join
  });

  it('dryRun with an idempotencyKey: −32602 naming idempotencyKey, nothing recorded or changed', async () => {
    const node = await cloneSimNode(template);
    await node.start();
    const before = { root: await treeDigest(node.root), state: await treeDigest(node.stateDir) };

    const err = await node.callError('update', {
      dryRun: true,
      idempotencyKey: 'repave-2026-11-21',
      set: { kubernetesVersion: '1.35.0' },
    });
    expect(err.code).toBe(-32602);
    expect(err.message).toContain('params.idempotencyKey: not allowed with dryRun: true');

    expect({ root: await treeDigest(node.root), state: await treeDigest(node.stateDir) }).toEqual(before);
    expect((await node.operations()).map((o) => o.kind)).toEqual(['update']); // only the join
  });

  /** Run an update that must fail in preflight and check that nothing else happened. */
  async function expectPreflightFailure(
    set: Record<string, unknown>,
    failedCheck: string,
    code: string,
  ): Promise<Op> {
    const node = await cloneSimNode(template);
    await node.start();
    const before = await hostDigest(node);
    const op = await node.update({ wait: true, set });
    expect(op.state).toBe('failed');
    expect(op.error?.code).toBe(code);
    const phases = Object.fromEntries(op.phases.map((p) => [p.name, p.state]));
    expect(phases).toMatchObject({
      preflight: 'failed',
      provision: 'skipped',
      stage: 'skipped',
      stop: 'skipped',
      start: 'skipped',
      commit: 'skipped',
    });
    const checks = op.error?.data?.checks as Array<{ name: string; ok: boolean; message: string }>;
    expect(checks.map((c) => c.name)).toContain(failedCheck);
    expect(checks.every((c) => !c.ok)).toBe(true);

    expect(await hostDigest(node)).toEqual(before);
    await expectSingleMachine(node, { active: 'kube1', version: JOIN_VERSION });
    expect(await node.readJournal()).toMatchObject({
      operationId: op.id,
      closed: true,
      outcome: 'failed',
      sourceStopped: false,
    });
    return op;
  }

  it('an image the mirror does not have: failed in preflight, host untouched', async () => {
    const applied = JSON.parse(await readFile(template.appliedConfig('kube1'), 'utf8')) as {
      OCIImage: string;
    };
    const unknown = applied.OCIImage.replace(/:[^:/]+$/, ':does-not-exist');
    expect(unknown).toMatch(/^127\.0\.0\.1:\d+\/agentd\/sim-rootfs:does-not-exist$/);
    const op = await expectPreflightFailure({ image: unknown }, 'image', 'IMAGE_PULL_FAILED');
    expect(op.error?.message).toContain('does-not-exist');
  });

  it('a Kubernetes version the mirror does not have: failed in preflight, host untouched', async () => {
    const op = await expectPreflightFailure(
      { kubernetesVersion: '99.0.0' },
      'artifact:kubelet',
      'DOWNLOAD_FAILED',
    );
    expect(op.error?.message).toContain('99.0.0');
  });
});
