// Why the fake API server (test/support/fake-kube): no fault: no credentials, a missing CRD, a rejected token, a node not joined, all possible on kube-apiserver; portable in part (test/cluster/crd-schema.test.ts: a CRD installed late).
/**
 * The watcher when Kubernetes is broken or absent: the daemon keeps serving, and the reason
 * shows in `status.watcher` (and the logs and metrics). Also the failure path of a repave.
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

interface WatcherStatus {
  enabled: boolean;
  reason: string | null;
  connected: boolean;
  machineName: string | null;
  lastReconcileAt: string | null;
  lastError: string | null;
  lastErrorCode: string | null;
}

const call = <T = Record<string, unknown>>(d: TestDaemon, method: string, params?: unknown): Promise<T> =>
  rpcResult<T>(d, method, params);

const watcher = async (d: TestDaemon): Promise<WatcherStatus> =>
  (await call<{ watcher: WatcherStatus }>(d, 'status')).watcher;

async function fakeWithKubeconfig(
  options: FakeKubeOptions = {},
  token?: string,
): Promise<{ kube: FakeKube; kubeconfig: string }> {
  const kube = await startFakeKube(options);
  onTestFinished(() => kube.close());
  const dir = await makeTempDir('agentd-watch-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml(token));
  return { kube, kubeconfig };
}

describe('Machine watcher: no credentials, broken Kubernetes', () => {
  it('does not run without credentials, and says why; drain is refused', async () => {
    const d = await startTestDaemon({ args: ['--sim'] });
    expect(await watcher(d)).toMatchObject({
      enabled: false,
      connected: false,
      reason: expect.stringContaining('--kubeconfig'),
    });
    const drain = await d.rpc('drain', {});
    expect(drain.error).toMatchObject({ data: { code: 'PRECONDITION_FAILED' } });
    const update = await d.rpc('update', { drain: true, dryRun: false });
    expect(update.error).toMatchObject({ data: { code: 'PRECONDITION_FAILED' } });
  });

  it('does not run with --no-watch', async () => {
    const { kube, kubeconfig } = await fakeWithKubeconfig();
    const d = await startTestDaemon({
      args: ['--sim', '--kubeconfig', kubeconfig, '--no-watch', '--machine-name', NAME],
    });
    await call(d, 'update', { wait: true });
    expect(await watcher(d)).toMatchObject({ enabled: false, reason: 'disabled by --no-watch' });
    // The node's cordon is followed all the same (a watch of its Node)...
    await waitUntil(
      'the watch of the Node',
      async () => kube.countRequests({ resource: 'nodes', verb: 'watch' }) === 1,
      d,
    );
    // ...but the Machine is neither watched nor written: following the cordon only reads it for
    // the Node it names, as drain does.
    expect(kube.countRequests((r) => r.resource === 'machines' && r.verb !== 'get')).toBe(0);
  });

  it('reports a missing CRD, keeps serving, and recovers once the CRD is installed', async () => {
    const { kube, kubeconfig } = await fakeWithKubeconfig({ crdInstalled: { 'unbounded-cloud.io': false } });
    const d = await startTestDaemon({ args: ['--sim', '--kubeconfig', kubeconfig] });
    const join = await call<{ state: string }>(d, 'update', { wait: true });
    expect(join.state).toBe('succeeded');
    await waitUntil('the CRD error', async () => (await watcher(d)).lastErrorCode === 'KUBE_UNAVAILABLE', d);
    const w = await watcher(d);
    expect(w).toMatchObject({ enabled: true, connected: false, machineName: NAME });
    expect(w.lastError).toContain('machines.unbounded-cloud.io');
    // The log line comes through the daemon's stdout, a pipe that may be read after the answer.
    await waitUntil(
      'the log line',
      () => d.logs().includes('machines.unbounded-cloud.io is not installed'),
      d,
    );
    expect((await d.http('GET', '/readyz')).status).toBe(200);
    expect((await d.http('GET', '/metrics')).body).toMatch(
      /agentd_watch_restarts_total\{reason="error"\} [1-9]/,
    );

    kube.setCrdInstalled('unbounded-cloud.io', true);
    await waitUntil('the watcher to recover', async () => (await watcher(d)).connected, d);
    expect(kube.getMachine(NAME)).toBeDefined();
    expect((await watcher(d)).lastError).toBeNull();
  });

  it('reports a token the API server rejects, without the token, and keeps serving', async () => {
    const { kubeconfig } = await fakeWithKubeconfig({}, 'not-a-valid-token');
    const d = await startTestDaemon({ args: ['--sim', '--kubeconfig', kubeconfig, '--machine-name', NAME] });
    await waitUntil('the 401', async () => (await watcher(d)).lastErrorCode === 'KUBE_UNAVAILABLE', d);
    const w = await watcher(d);
    expect(w.lastError).toContain('unauthorized');
    expect(w.lastError).not.toContain('not-a-valid-token');
    expect(d.logs()).not.toContain('not-a-valid-token');
    const join = await call<{ state: string }>(d, 'update', { wait: true });
    expect(join.state).toBe('succeeded');
  });

  it('cannot register before the node joined, and registers once it has', async () => {
    const { kube, kubeconfig } = await fakeWithKubeconfig();
    const d = await startTestDaemon({ args: ['--sim', '--kubeconfig', kubeconfig, '--machine-name', NAME] });
    await waitUntil(
      'the registration error',
      async () => (await watcher(d)).lastErrorCode === 'PRECONDITION_FAILED',
      d,
    );
    expect(kube.getMachine(NAME)).toBeUndefined();
    await call(d, 'update', { wait: true });
    await waitUntil('the Machine to be created', () => kube.getMachine(NAME) !== undefined, d);
    await waitUntil('the watcher to connect', async () => (await watcher(d)).connected, d);
  });

  it('marks the Machine Failed/RolledBack when the repave rolls back, and does not retry it', async () => {
    const { kube, kubeconfig } = await fakeWithKubeconfig();
    const d = await startTestDaemon({
      args: ['--sim', '--kubeconfig', kubeconfig, ...WATCHER_DEBUG_ARGS],
      env: { AGENTD_SIM_FAULTS: 'kubelet-inactive:kube2' },
    });
    await call(d, 'update', { wait: true });
    await waitUntil('the watcher to connect', async () => (await watcher(d)).connected, d);
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    const failed = (m: KubeObject | undefined): boolean => m?.status?.phase === 'Failed';
    await waitUntil('the Machine to be marked Failed', () => failed(kube.getMachine(NAME)), d);
    // The Failed status's own event reconciled: the target is blocked, not tried again.
    await watcherCaughtUp(d, kube, NAME, ['blocked', 'already-failed']);

    const m = kube.getMachine(NAME);
    const conditions = (m?.status?.conditions ?? []) as Array<Record<string, unknown>>;
    expect(conditions.find((c) => c.type === 'NodeUpdated')).toMatchObject({
      status: 'False',
      reason: 'RolledBack',
      message: expect.stringContaining('rolled back (VERIFY_FAILED)'),
      observedGeneration: m?.metadata.generation,
    });
    expect(m?.status?.message).toMatch(/^agentd: update .* rolled back \(VERIFY_FAILED\)/);
    expect((m?.status?.operations as { repaveCounter?: number } | undefined)?.repaveCounter ?? 0).toBe(0);
    const { operations } = await call<{ operations: Array<{ requestedBy: string; state: string }> }>(
      d,
      'operations.list',
    );
    expect(operations.filter((o) => o.requestedBy === 'watcher').map((o) => o.state)).toEqual([
      'rolled_back',
    ]);
    expect((await call<{ node: { activeMachine: string } }>(d, 'status')).node.activeMachine).toBe('kube1');
  });
});
