// Why the fake API server (test/support/fake-kube): 500s, cut watches, a compaction and another status writer between agentd’s read and its patch, at chosen moments during a repave.
/**
 * The Machine CR watcher end to end (docs/watcher.md): the real daemon (`--sim`, temp paths) with
 * `--kubeconfig` pointing at the fake API server, driven by changing the Machine there.
 * Needs `npm run build`.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeTempDir, startTestDaemon, waitUntil } from '../support/daemon.js';
import type { TestDaemon } from '../support/daemon.js';
import { startFakeKube } from '../support/fake-kube.js';
import { rpcResult } from '../support/provision-fixtures.js';
import type { FakeKube, FakeKubeOptions, KubeObject } from '../support/fake-kube.js';
import { WATCHER_DEBUG_ARGS, watcherCaughtUp } from '../support/watcher-logs.js';

const NAME = 'sim-node';

interface Op {
  id: string;
  kind: string;
  state: string;
  requestedBy: string;
  idempotencyKey: string | null;
  from: string | null;
  to: string | null;
  result: Record<string, unknown> | null;
}

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

const call = <T = Record<string, unknown>>(d: TestDaemon, method: string, params?: unknown): Promise<T> =>
  rpcResult<T>(d, method, params);

function condition(m: KubeObject | undefined): Condition | undefined {
  const list = (m?.status?.conditions ?? []) as Condition[];
  return list.find((c) => c.type === 'NodeUpdated');
}

const acked = (m: KubeObject | undefined): number =>
  (m?.status?.operations as { repaveCounter?: number } | undefined)?.repaveCounter ?? 0;

async function watcherUpdates(d: TestDaemon): Promise<Op[]> {
  const { operations } = await call<{ operations: Op[] }>(d, 'operations.list', { limit: 100 });
  return operations.filter((op) => op.kind === 'update' && op.requestedBy === 'watcher').reverse();
}

/** A fake API server, a daemon using it, the node joined and the watcher connected. */
async function setup(fake: FakeKubeOptions = {}): Promise<{ kube: FakeKube; d: TestDaemon }> {
  const kube = await startFakeKube(fake);
  onTestFinished(() => kube.close());
  const dir = await makeTempDir('agentd-watch-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml());
  const d = await startTestDaemon({ args: ['--sim', '--kubeconfig', kubeconfig, ...WATCHER_DEBUG_ARGS] });
  const join = await call<Op>(d, 'update', { wait: true });
  expect(join.state).toBe('succeeded');
  await waitUntil(
    'the watcher to connect',
    async () => (await call<{ watcher: { connected: boolean } }>(d, 'status')).watcher.connected,
    d,
  );
  return { kube, d };
}

async function activeMachine(d: TestDaemon): Promise<string | null> {
  return (await call<{ node: { activeMachine: string | null } }>(d, 'status')).node.activeMachine;
}

describe('Machine watcher', () => {
  it('registers the missing Machine, then repaves when repaveCounter is bumped', async () => {
    const { kube, d } = await setup();
    const created = kube.getMachine(NAME);
    expect(created?.spec).toMatchObject({
      kubernetes: {
        version: 'v1.34.0',
        bootstrapTokenRef: { name: 'bootstrap-token-simsim' },
        nodeLabels: { 'unbounded-cloud.io/sim': 'true' },
      },
    });
    expect(await activeMachine(d)).toBe('kube1');

    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    await waitUntil('the repave to be acknowledged', () => acked(kube.getMachine(NAME)) === 1, d);

    const m = kube.getMachine(NAME);
    expect(m?.status?.phase).toBe('Joining');
    expect(condition(m)).toMatchObject({
      status: 'True',
      reason: 'Succeeded',
      observedGeneration: m?.metadata.generation,
    });
    expect(await activeMachine(d)).toBe('kube2');
    const updates = await watcherUpdates(d);
    expect(updates).toHaveLength(1);
    expect(updates[0]).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube2' });
    expect(updates[0]?.idempotencyKey).toBe(`machine/${m?.metadata.uid}/gen-2/repave-1`);
    // Provisioning + InProgress went out before the update, Joining after it.
    const phases = kube.requests
      .filter((r) => r.resource === 'machines/status' && r.verb === 'patch' && r.status === 200)
      .map((r) => (r.body as { status: { phase?: string } }).status.phase)
      .filter((p) => p !== undefined);
    expect(phases).toEqual(['Provisioning', 'Joining']);
  });

  it('coalesces three bumps made while an update runs into exactly one more update', async () => {
    const { kube, d } = await setup();
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    await waitUntil('the first repave to run', async () => {
      const s = await call<{ operation: Op | null }>(d, 'status');
      return s.operation?.requestedBy === 'watcher';
    });
    for (const n of [2, 3, 4]) kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: n } });
    await waitUntil('the last bump to be acknowledged', () => acked(kube.getMachine(NAME)) === 4, d);
    // The acknowledgement's own event reconciled, with nothing more to do: no update can follow.
    await watcherCaughtUp(d, kube, NAME);

    const updates = await watcherUpdates(d);
    expect(updates.map((u) => u.state)).toEqual(['succeeded', 'succeeded']);
    expect(updates.map((u) => u.idempotencyKey?.split('/').pop())).toEqual(['repave-1', 'repave-4']);
    expect(await activeMachine(d)).toBe('kube1');
    // The first acknowledgement was 1 (what that update satisfied), never 2 or 3.
    const acks = kube.requests
      .filter((r) => r.resource === 'machines/status' && r.verb === 'patch' && r.status === 200)
      .map(
        (r) =>
          (r.body as { status: { operations?: { repaveCounter?: number } } }).status.operations
            ?.repaveCounter,
      )
      .filter((c) => c !== undefined);
    expect(acks).toEqual([1, 4]);
  });

  it('applies a Kubernetes version change without a counter bump as an ordinary update', async () => {
    const { kube, d } = await setup();
    kube.patchMachineSpecAsOtherWriter(NAME, { kubernetes: { version: 'v1.35.0' } });
    await waitUntil(
      'the version to be applied',
      () => condition(kube.getMachine(NAME))?.reason === 'Succeeded',
      d,
    );

    const applied = await call<{ node: { applied: { kubernetesVersion: string } } }>(d, 'status');
    expect(applied.node.applied.kubernetesVersion).toBe('1.35.0');
    const m = kube.getMachine(NAME);
    expect(m?.status?.phase).toBe('Joining');
    expect(acked(m)).toBe(0);
    const updates = await watcherUpdates(d);
    expect(updates).toHaveLength(1);
    expect(updates[0]?.result).toMatchObject({ changed: true });
  });

  it('survives cut watches, a 410 and 500s during a repave: one update, one acknowledgement', async () => {
    const { kube, d } = await setup();
    // A write the watch does not see, then compaction: resuming from our version is a 410.
    kube.putMachine({ metadata: { name: 'someone-else' } });
    kube.compactHistory();
    kube.cutWatches();
    const stopCuts = kube.cutWatchesEvery(300);
    onTestFinished(stopCuts);
    kube.failNext(3, { status: 500, match: { resource: 'machines/status', verb: 'patch' } });
    kube.failNext(2, { status: 500, match: { resource: 'machines', verb: 'get' } });

    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    await waitUntil('the repave to be acknowledged', () => acked(kube.getMachine(NAME)) === 1, d);
    stopCuts();
    await watcherCaughtUp(d, kube, NAME);

    expect(await watcherUpdates(d)).toHaveLength(1);
    const acks = kube.requests.filter(
      (r) =>
        r.resource === 'machines/status' &&
        r.verb === 'patch' &&
        r.status === 200 &&
        (r.body as { status: { operations?: unknown } }).status.operations !== undefined,
    );
    expect(acks).toHaveLength(1);
    expect(kube.getMachine(NAME)?.status?.phase).toBe('Joining');
    const metrics = (await d.http('GET', '/metrics')).body;
    expect(metrics).toMatch(/agentd_watch_restarts_total\{reason="gone"\} [1-9]/);
    // A cut watch ends as `closed` or, when the cut lands before the stream is read, `error`.
    expect(metrics).toMatch(/agentd_watch_restarts_total\{reason="(closed|error)"\} [1-9]/);
    expect(metrics).toMatch(/agentd_reconcile_total\{result="error"\} [1-9]/);
  });

  it('keeps what a concurrent status writer wrote and loses no acknowledgement', async () => {
    const { kube, d } = await setup();
    let n = 0;
    // Before each of agentd's status patches, another controller writes the status first.
    kube.beforeNext(
      { resource: 'machines/status', verb: 'patch' },
      () => {
        n += 1;
        const current = (kube.getMachine(NAME)?.status?.conditions ?? []) as Condition[];
        kube.patchMachineStatusAsOtherWriter(NAME, {
          phase: 'Ready',
          message: `machina: pass ${n}`,
          operations: { rebootCounter: n },
          conditions: [
            ...current.filter((c) => c.type !== 'Rebooted'),
            { type: 'Rebooted', status: 'True', reason: 'Done', message: `pass ${n}` },
          ],
        });
      },
      4,
    );
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    await waitUntil('the repave to be acknowledged', () => acked(kube.getMachine(NAME)) === 1, d);
    await watcherCaughtUp(d, kube, NAME);

    const m = kube.getMachine(NAME);
    expect(n).toBeGreaterThanOrEqual(2);
    expect(m?.status).toMatchObject({
      operations: { repaveCounter: 1, rebootCounter: n },
      message: `machina: pass ${n}`,
    });
    const conditions = (m?.status?.conditions ?? []) as Condition[];
    expect(conditions.find((c) => c.type === 'Rebooted')).toMatchObject({
      status: 'True',
      message: `pass ${n}`,
    });
    expect(condition(m)).toMatchObject({ status: 'True', reason: 'Succeeded' });
    expect(await watcherUpdates(d)).toHaveLength(1);
    // Every conflicting patch was retried from a fresh read.
    expect(kube.requests.some((r) => r.resource === 'machines/status' && r.status === 409)).toBe(true);
  });
});
