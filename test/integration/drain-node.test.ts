// Why the fake API server (test/support/fake-kube): no fault: PDBs whose disruptionsAllowed the test sets (no disruption controller), and agentd crashed mid-update; portable (test/cluster/drain.test.ts has the real PDB status).
/**
 * `drain`, `uncordon` and `update --drain` against the fake API server, through the real
 * daemon (`--sim`, temp paths, `--kubeconfig`). Needs `npm run build`.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeTempDir, startTestDaemon, waitUntil } from '../support/daemon.js';
import type { TestDaemon } from '../support/daemon.js';
import { startFakeKube } from '../support/fake-kube.js';
import { rpcResult } from '../support/provision-fixtures.js';
import type { FakeKube, NodeSeed } from '../support/fake-kube.js';

const NODE = 'sim-node';
const MARK = 'agentd.unbounded-cloud.io/cordoned-by-agentd';

interface Op {
  id: string;
  kind: string;
  state: string;
  phases: Array<{ name: string; state: string; startedAt: string | null; finishedAt: string | null }>;
  result: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
}

const call = <T = Op>(d: TestDaemon, method: string, params?: unknown): Promise<T> =>
  rpcResult<T>(d, method, params);

async function setup(node: NodeSeed = {}): Promise<{ kube: FakeKube; d: TestDaemon }> {
  const kube = await startFakeKube();
  onTestFinished(() => kube.close());
  kube.addNode(NODE, node);
  const dir = await makeTempDir('agentd-drain-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml());
  // No watcher: these tests are about the node, not the Machine.
  const d = await startTestDaemon({
    args: ['--sim', '--kubeconfig', kubeconfig, '--machine-name', NODE, '--no-watch'],
  });
  return { kube, d };
}

const unschedulable = (kube: FakeKube): boolean => kube.getNode(NODE)?.spec?.unschedulable === true;
const marked = (kube: FakeKube): boolean => kube.getNode(NODE)?.metadata.annotations?.[MARK] === 'true';
const cordonedInStatus = async (d: TestDaemon): Promise<boolean | null> =>
  (await call<{ node: { cordoned: boolean | null } }>(d, 'status')).node.cordoned;

describe('drain and uncordon', () => {
  it('times out on a PodDisruptionBudget that never allows, names the pod, and stays cordoned until uncordon', async () => {
    const { kube, d } = await setup();
    kube.addPod({ name: 'web-1', nodeName: NODE, labels: { app: 'web' } });
    kube.addPdb({ name: 'web', selector: { matchLabels: { app: 'web' } }, disruptionsAllowed: 0 });
    kube.addPod({ name: 'agent-x', nodeName: NODE, owner: { kind: 'DaemonSet', name: 'agent' } });
    kube.addPod({ name: 'etcd-static', nodeName: NODE, mirror: true, owner: { kind: 'Node', name: NODE } });
    kube.addPod({ name: 'elsewhere', nodeName: 'other-node' });

    const op = await call(d, 'drain', { timeoutSeconds: 1.5, ignoreDaemonSets: true, wait: true });
    expect(op).toMatchObject({ kind: 'drain', state: 'failed', error: { code: 'DRAIN_FAILED' } });
    expect(op.result).toMatchObject({
      evicted: [],
      remaining: [
        { namespace: 'default', name: 'web-1', reason: expect.stringContaining('PodDisruptionBudget') },
      ],
    });
    expect((op.result?.skipped as Array<{ name: string }>).map((p) => p.name).sort()).toEqual([
      'agent-x',
      'etcd-static',
    ]);
    expect(kube.getPod('default', 'web-1')).toBeDefined();
    expect(unschedulable(kube) && marked(kube)).toBe(true);
    expect(await cordonedInStatus(d)).toBe(true);

    const un = await call(d, 'uncordon', { wait: true });
    expect(un).toMatchObject({
      kind: 'uncordon',
      state: 'succeeded',
      result: { uncordoned: true, outcome: 'uncordoned' },
    });
    expect(unschedulable(kube) || marked(kube)).toBe(false);
    expect(await cordonedInStatus(d)).toBe(false);
  });

  it('never uncordons a node an administrator cordoned, unless forced', async () => {
    const { kube, d } = await setup({ unschedulable: true });
    kube.addPod({ name: 'api-1', nodeName: NODE });

    const op = await call(d, 'drain', { wait: true });
    expect(op).toMatchObject({
      state: 'succeeded',
      result: { alreadyCordoned: true, evicted: [{ name: 'api-1' }] },
    });
    expect(kube.getPod('default', 'api-1')).toBeUndefined();
    expect(marked(kube)).toBe(false);

    const un = await call(d, 'uncordon', { wait: true });
    expect(un.result).toEqual({ uncordoned: false, outcome: 'cordoned-by-other' });
    expect(unschedulable(kube)).toBe(true);
    expect(await cordonedInStatus(d)).toBe(true);

    const forced = await call(d, 'uncordon', { force: true, wait: true });
    expect(forced.result).toEqual({ uncordoned: true, outcome: 'uncordoned' });
    expect(unschedulable(kube)).toBe(false);
  });

  it('reports a dry run without changing anything or recording an operation', async () => {
    const { kube, d } = await setup();
    kube.addPod({ name: 'bare', nodeName: NODE, owner: null });
    kube.addPod({ name: 'api-1', nodeName: NODE });
    const op = await call(d, 'drain', { dryRun: true });
    expect(op).toMatchObject({
      kind: 'drain',
      state: 'succeeded',
      result: { dryRun: true, alreadyCordoned: false },
    });
    expect(op.result?.evicted).toEqual([{ namespace: 'default', name: 'api-1' }]);
    expect(op.result?.remaining).toEqual([
      { namespace: 'default', name: 'bare', reason: expect.stringContaining('not managed by a controller') },
    ]);
    expect(unschedulable(kube)).toBe(false);
    expect(kube.listPods(NODE)).toHaveLength(2);
    expect((await call<{ operations: Op[] }>(d, 'operations.list')).operations).toEqual([]);
  });

  it('update --drain drains before stop and uncordons after verify', async () => {
    const { kube, d } = await setup();
    await call(d, 'update', { wait: true });
    kube.addPod({ name: 'api-1', nodeName: NODE });
    kube.addPod({ name: 'cache-1', nodeName: NODE, emptyDir: true });
    kube.addPod({ name: 'agent-x', nodeName: NODE, owner: { kind: 'DaemonSet', name: 'agent' } });

    const op = await call(d, 'update', { set: { kubernetesVersion: '1.35.0' }, drain: true, wait: true });
    expect(op.state).toBe('succeeded');
    const phase = (name: string) => op.phases.find((p) => p.name === name);
    expect(phase('drain')?.state).toBe('succeeded');
    expect(phase('uncordon')?.state).toBe('succeeded');
    expect(Date.parse(phase('drain')?.finishedAt ?? '')).toBeLessThanOrEqual(
      Date.parse(phase('stop')?.startedAt ?? ''),
    );
    expect(kube.listPods(NODE).map((p) => p.metadata.name)).toEqual(['agent-x']);
    expect(unschedulable(kube) || marked(kube)).toBe(false);
  });

  it('update --drain that cannot drain fails before stop and takes its cordon back', async () => {
    const { kube, d } = await setup();
    await call(d, 'update', { wait: true });
    kube.addPod({ name: 'bare', nodeName: NODE, owner: null });

    const op = await call(d, 'update', { set: { kubernetesVersion: '1.35.0' }, drain: true, wait: true });
    expect(op).toMatchObject({ state: 'failed', error: { code: 'DRAIN_FAILED' } });
    expect(op.phases.find((p) => p.name === 'stop')?.state).toBe('skipped');
    expect(unschedulable(kube) || marked(kube)).toBe(false);
    expect((await call<{ node: { activeMachine: string } }>(d, 'status')).node.activeMachine).toBe('kube1');
  });

  it('a crash mid-update with drain, after the cordon: once restarted and ready, agentd uncordons the node', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    kube.addNode(NODE);
    const dir = await makeTempDir('agentd-drain-crash-');
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfig, kube.kubeconfigYaml());
    const args = ['--sim', '--kubeconfig', kubeconfig, '--machine-name', NODE, '--no-watch'];
    // Dies in the middle of stopping kube1: drained and cordoned, the node already going down.
    const first = await startTestDaemon({
      dir,
      args,
      env: { AGENTD_FAILPOINTS: 'cmd:machinectl disable kube1' },
    });
    await call(first, 'update', { wait: true });
    kube.addPod({ name: 'api-1', nodeName: NODE });
    await call(first, 'update', { set: { kubernetesVersion: '1.35.0' }, drain: true, wait: true }).catch(
      () => undefined,
    );
    await first.waitExit();
    expect(first.proc.signalCode, first.logs()).toBe('SIGKILL');
    expect(unschedulable(kube) && marked(kube)).toBe(true);

    // Recovery runs before the Kubernetes client is loaded: the uncordon is deferred, then done.
    const second = await startTestDaemon({ dir, args });
    await waitUntil('the node to be uncordoned', () => !unschedulable(kube), second);
    expect(marked(kube)).toBe(false);
    const ops = (await call<{ operations: Op[] }>(second, 'operations.list')).operations;
    const interrupted = ops.find((o) => o.state === 'interrupted');
    expect(interrupted?.result?.recovery).toMatchObject({
      outcome: 'rolled back to kube1',
      uncordonPending: true,
      actions: expect.arrayContaining([expect.objectContaining({ step: 'uncordon', deferred: true })]),
    });
    expect(interrupted?.error).toBeNull();
    // The flag is cleared (and the status re-read) just after the Node is patched.
    type Status = { node: { activeMachine: string; warningDetails: Array<{ code: string }> } };
    const pendingWarnings = async (): Promise<unknown[]> =>
      (await call<Status>(second, 'status')).node.warningDetails.filter((w) => w.code === 'pending-uncordon');
    await waitUntil('the status warning to go', async () => (await pendingWarnings()).length === 0, second);
    expect((await call<Status>(second, 'status')).node.activeMachine).toBe('kube1');
    expect(JSON.parse(await readFile(path.join(second.stateDir, 'journal.json'), 'utf8'))).toMatchObject({
      operationId: interrupted?.id,
      closed: true,
      uncordonPending: false,
    });
    expect(second.logs()).toContain('uncordoned the node');
  });
});
