/**
 * An operator's pause and resume with their own kubeconfig (src/fleet/operator.ts), against the
 * fake API server enforcing deploy/rbac.yaml's roles: the operator's group pauses (editing the
 * policy in place, conditionally) and resumes (clearing the failures); a node's token and a user
 * without the Role are refused with the missing right named; an answer that never comes may have
 * made the change, and says so.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createOperatorFleet } from '../../../src/fleet/operator.js';
import { systemClock } from '../../../src/host/clock.js';
import { loadOperatorKubeconfig } from '../../../src/kube/kubeconfig.js';
import { startFakeKube, type FakeKube } from '../../support/fake-kube.js';
import { rolesOfDeployRbac } from '../../support/rbac-rules.js';

const NS = 'agentd-system';
const OPERATOR = 'operator-token';
const NODE = 'abcdef.0123456789abcdef';
const NOBODY = 'nobody-token';

let kube: FakeKube;
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-operator-'));
  kube = await startFakeKube({
    tokens: {
      [OPERATOR]: await rolesOfDeployRbac({ group: 'agentd:fleet-operators', user: 'alice' }),
      [NODE]: await rolesOfDeployRbac(),
      [NOBODY]: { user: 'bob', rules: [] },
    },
  });
});
afterEach(async () => {
  await kube.close();
  await rm(dir, { recursive: true, force: true });
});

/** The operator fleet of a kubeconfig file with `token`. */
async function fleetAs(token: string, signal?: AbortSignal) {
  const file = path.join(dir, `${token}.kubeconfig`);
  await writeFile(file, kube.kubeconfigYaml(token));
  const kubeconfig = loadOperatorKubeconfig({ kubeconfig: file, env: {}, homedir: dir, cwd: dir });
  return { file, fleet: createOperatorFleet({ kubeconfig, namespace: NS, clock: systemClock, signal }) };
}

async function rejection(
  p: Promise<unknown>,
): Promise<{ code: string; message: string; data: Record<string, unknown> }> {
  try {
    await p;
  } catch (err) {
    return err as { code: string; message: string; data: Record<string, unknown> };
  }
  throw new Error('expected a rejection');
}

const failures = (n: number): string =>
  JSON.stringify(
    Array.from({ length: n }, (_, i) => ({
      node: `w${i}`,
      operation: `op-${i}`,
      state: 'failed',
      message: 'x',
      at: 't',
    })),
  );

describe('an operator pauses and resumes with their own kubeconfig', () => {
  it('pauses by editing policy.yaml in place with the resourceVersion read, and resumes clearing the failures', async () => {
    kube.putConfigMap(NS, 'agentd-fleet', {
      'policy.yaml': '# the rollout\nmaxConcurrent: 2 # two at a time\n',
    });
    kube.putConfigMap(NS, 'agentd-fleet-state', { 'failures.json': failures(2) });
    const { file, fleet } = await fleetAs(OPERATOR);
    const paused = await fleet.pause();
    expect(paused).toMatchObject({
      namespace: NS,
      kubeconfig: { source: '--kubeconfig', files: [file], context: 'fake', server: kube.url },
      present: true,
      paused: true,
      policy: { maxConcurrent: 2, paused: true },
      failures: [{ node: 'w0' }, { node: 'w1' }],
      errors: [],
    });
    expect(paused).not.toHaveProperty('node');
    // Comments and other keys kept; the update carried the resourceVersion it read.
    expect(kube.getConfigMap(NS, 'agentd-fleet')?.data).toEqual({
      'policy.yaml': '# the rollout\nmaxConcurrent: 2 # two at a time\npaused: true\n',
    });
    const update = kube.requests.find((r) => r.verb === 'update' && r.name === 'agentd-fleet');
    expect(update?.status).toBe(200);

    const resumed = await fleet.resume();
    expect(resumed.clearedFailures).toBe(2);
    expect(resumed.status).toMatchObject({ paused: false, halted: false, failures: [] });
    expect(kube.getConfigMap(NS, 'agentd-fleet-state')?.data).toEqual({ 'failures.json': '[]' });
    expect(kube.getConfigMap(NS, 'agentd-fleet')?.data).toEqual({
      'policy.yaml': '# the rollout\nmaxConcurrent: 2 # two at a time\npaused: false\n',
    });
  });

  it('with no policy, pause creates it with only paused: true; resume then clears nothing', async () => {
    const { fleet } = await fleetAs(OPERATOR);
    expect(await fleet.pause()).toMatchObject({ present: true, paused: true, policy: { maxConcurrent: 1 } });
    expect(kube.getConfigMap(NS, 'agentd-fleet')?.data).toEqual({ 'policy.yaml': 'paused: true\n' });
    expect((await fleet.resume()).clearedFailures).toBe(0);
  });

  it("refuses a node's token and a user without the Role, naming the right that is missing", async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 2\n' });
    kube.putConfigMap(NS, 'agentd-fleet-state', { 'failures.json': failures(1) });
    const node = await fleetAs(NODE);
    const refused = await rejection(node.fleet.pause());
    expect(refused).toMatchObject({
      code: 'KUBE_UNAVAILABLE',
      data: {
        reason: 'Forbidden',
        verb: 'update',
        resource: 'configmaps',
        name: 'agentd-fleet',
        namespace: NS,
        right: `update configmaps agentd-fleet in namespace ${NS}`,
        context: 'fake',
      },
    });
    expect(refused.message).toMatch(
      new RegExp(
        `^fleet pause: the credentials of context fake of ${node.file} may not update configmaps agentd-fleet in namespace ${NS} \\(the API server: .+\\); pause needs the rights of the Role agentd-fleet-operator in ${NS} \\(deploy/rbac.yaml\\), bound to the group agentd:fleet-operators`,
      ),
    );
    // A user without any right is refused at the first read: the policy's for a pause, the
    // failures' for a resume (it clears them first). (The fake does not model the admission
    // policy that keeps a node from clearing failures: test/cluster/least-privilege.test.ts.)
    const nobody = await fleetAs(NOBODY);
    expect(await rejection(nobody.fleet.pause())).toMatchObject({
      data: { reason: 'Forbidden', verb: 'get', name: 'agentd-fleet' },
    });
    expect(await rejection(nobody.fleet.resume())).toMatchObject({
      data: { reason: 'Forbidden', verb: 'get', name: 'agentd-fleet-state' },
      message: expect.stringMatching(
        /^fleet resume: the credentials of .* may not get configmaps agentd-fleet-state in namespace agentd-system/,
      ),
    });
    // Nothing changed.
    expect(kube.getConfigMap(NS, 'agentd-fleet')?.data).toEqual({ 'policy.yaml': 'maxConcurrent: 2\n' });
    expect(kube.getConfigMap(NS, 'agentd-fleet-state')?.data).toEqual({ 'failures.json': failures(1) });
  });

  it('credentials the API server rejects: a 401 naming the kubeconfig and context', async () => {
    const { file, fleet } = await fleetAs('not-a-known-token');
    expect(await rejection(fleet.pause())).toMatchObject({
      code: 'KUBE_UNAVAILABLE',
      data: { reason: 'Unauthorized' },
      message: `fleet pause: the API server ${kube.url} rejected the credentials of context fake of ${file} (401 Unauthorized): they may have expired or been revoked; get a fresh kubeconfig`,
    });
  });

  it('a write whose answer never comes may have been made: the error says so, and how to see it', async () => {
    kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': 'maxConcurrent: 2\n' });
    const release = kube.delay(2_000, { verb: 'update', resource: 'configmaps' });
    const deadline = new AbortController();
    const { fleet } = await fleetAs(OPERATOR, deadline.signal);
    const pausing = rejection(fleet.pause());
    await expect.poll(() => kube.countRequests({ verb: 'update', resource: 'configmaps' })).toBe(1);
    deadline.abort();
    const err = await pausing;
    release();
    // The deadline aborted it: cancelled, and the change may have been made.
    expect(err).toMatchObject({ code: 'CANCELLED', data: { mayHaveStarted: true } });
    expect(err.message).toBe(
      'update ConfigMap agentd-system/agentd-fleet: cancelled; the pause may have taken effect all the same: see whether it did with: kubectl -n agentd-system get configmap agentd-fleet agentd-fleet-state -o yaml (or agentctl fleet status on a node); running it again is safe',
    );
  });

  it('an API server that cannot be reached: the server and the kubeconfig named, nothing said to have changed', async () => {
    const file = path.join(dir, 'nowhere.kubeconfig');
    // A port nothing listens on: the server of a closed fake.
    const closed = await startFakeKube();
    await writeFile(file, closed.kubeconfigYaml());
    await closed.close();
    const kubeconfig = loadOperatorKubeconfig({ kubeconfig: file, env: {}, homedir: dir, cwd: dir });
    const fleet = createOperatorFleet({ kubeconfig, namespace: NS, clock: systemClock });
    const err = await rejection(fleet.pause());
    expect(err).toMatchObject({ code: 'KUBE_UNAVAILABLE', data: { reason: 'Unreachable' } });
    expect(err.message).toMatch(
      new RegExp(
        `^get ConfigMap agentd-system/agentd-fleet: cannot reach the Kubernetes API server: .*ECONNREFUSED.* \\(${closed.url}, context fake of ${file}\\)$`,
      ),
    );
    expect(err.data).not.toHaveProperty('mayHaveStarted');
  });

  it('a read that fails is not said to have changed anything', async () => {
    const deadline = new AbortController();
    deadline.abort();
    const { fleet } = await fleetAs(OPERATOR, deadline.signal);
    const err = await rejection(fleet.pause());
    expect(err).toMatchObject({
      code: 'CANCELLED',
      message: 'get ConfigMap agentd-system/agentd-fleet: cancelled',
    });
    expect(err.data).not.toHaveProperty('mayHaveStarted');
    expect(kube.countRequests({ resource: 'configmaps' })).toBe(0);
  });
});
