// Why the fake API server (test/support/fake-kube): no fault (the rollback is the simulated host’s): portable, not covered in test/cluster beyond one rollback (events.test.ts).
/**
 * No silent retry of a bad version (docs/watcher.md, "RolledBack"), end to end: the real daemon
 * (`--sim`, temp paths) with the fake API server; a repave whose new kubelet never comes up
 * rolls back, the Machine says RolledBack, and the watcher does not apply that target again —
 * not on another Machine event, not after a restart of agentd — until the counter moves.
 * Needs `npm run build`.
 */
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeTempDir, startTestDaemon, waitUntil } from '../support/daemon.js';
import type { TestDaemon } from '../support/daemon.js';
import { startFakeKube } from '../support/fake-kube.js';
import type { KubeObject } from '../support/fake-kube.js';
import { rpcResult } from '../support/provision-fixtures.js';

const NAME = 'sim-node';

interface Op {
  id: string;
  kind: string;
  state: string;
  requestedBy: string;
  error: { code: string; message: string } | null;
}

interface WatcherView {
  connected: boolean;
  lastReconcileAt: string | null;
  blocked: {
    code: string;
    outcome: string;
    repaveCounter: number;
    operationId: string;
    reason: string;
  } | null;
}

const call = <T = Record<string, unknown>>(d: TestDaemon, method: string, params?: unknown): Promise<T> =>
  rpcResult<T>(d, method, params);

const settle = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function nodeUpdated(
  m: KubeObject | undefined,
): { status: string; reason: string; message: string } | undefined {
  return (
    (m?.status?.conditions ?? []) as Array<{ type: string; status: string; reason: string; message: string }>
  ).find((c) => c.type === 'NodeUpdated');
}

async function watcherUpdates(d: TestDaemon): Promise<Op[]> {
  const { operations } = await call<{ operations: Op[] }>(d, 'operations.list', { limit: 100 });
  return operations.filter((op) => op.kind === 'update' && op.requestedBy === 'watcher').reverse();
}

const watcher = async (d: TestDaemon): Promise<WatcherView> =>
  (await call<{ watcher: WatcherView }>(d, 'status')).watcher;

describe('Machine watcher: a target that rolled back', () => {
  it('is not applied again (another event, a restart of agentd) until the Machine asks anew', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    const dir = await makeTempDir('agentd-rolledback-');
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfig, kube.kubeconfigYaml());
    const args = ['--sim', '--kubeconfig', kubeconfig, '--verify-timeout', '2s'];
    // kube2's new kubelet never becomes active: the repave kube1 → kube2 rolls back.
    const faulty = { AGENTD_SIM_FAULTS: 'kubelet-inactive:kube2' };
    let d = await startTestDaemon({ dir, args, env: faulty });
    expect((await call<Op>(d, 'update', { wait: true })).state).toBe('succeeded');
    await waitUntil('the watcher to connect', async () => (await watcher(d)).connected, d);

    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    await waitUntil(
      'the Machine to say RolledBack',
      () => nodeUpdated(kube.getMachine(NAME))?.reason === 'RolledBack',
      d,
    );
    const m = kube.getMachine(NAME);
    expect(m?.status?.phase).toBe('Failed');
    expect(nodeUpdated(m)).toMatchObject({
      status: 'False',
      message: expect.stringMatching(
        /rolled back \(VERIFY_FAILED\): not applied again until the Machine asks anew/,
      ),
    });
    const [first] = await watcherUpdates(d);
    expect(first).toMatchObject({ state: 'rolled_back', error: { code: 'VERIFY_FAILED' } });
    expect(existsSync(path.join(dir, 'state', 'watcher-blocked-target.json'))).toBe(true);
    await waitUntil('status to show the block', async () => (await watcher(d)).blocked !== null, d);
    expect((await watcher(d)).blocked).toMatchObject({
      code: 'VERIFY_FAILED',
      outcome: 'rolled_back',
      repaveCounter: 1,
      operationId: first?.id,
    });

    // Another Machine event (the same target, written differently: a new generation) wakes the
    // watcher, which looks and leaves it.
    const before = (await watcher(d)).lastReconcileAt;
    kube.patchMachineSpecAsOtherWriter(NAME, { kubernetes: { version: '1.34.0' } });
    await waitUntil('another reconcile', async () => (await watcher(d)).lastReconcileAt !== before, d);
    await settle(300);
    expect(await watcherUpdates(d)).toHaveLength(1);

    // A restart of agentd does not retry it either: the block is in the state dir.
    expect(await d.stop('SIGTERM')).toBe(0);
    d = await startTestDaemon({ dir, args, env: faulty });
    await waitUntil('the watcher to connect again', async () => (await watcher(d)).connected, d);
    await waitUntil(
      'the restarted watcher to reconcile',
      async () => (await watcher(d)).lastReconcileAt !== null,
      d,
    );
    expect((await watcher(d)).blocked).toMatchObject({ code: 'VERIFY_FAILED', repaveCounter: 1 });
    // A new generation means a new idempotency key: only the durable record keeps it from running.
    const afterRestart = (await watcher(d)).lastReconcileAt;
    kube.patchMachineSpecAsOtherWriter(NAME, { kubernetes: { version: 'v1.34.0' } });
    await waitUntil(
      'a reconcile after the restart',
      async () => (await watcher(d)).lastReconcileAt !== afterRestart,
      d,
    );
    await settle(500);
    expect(await watcherUpdates(d)).toHaveLength(1);
    expect(nodeUpdated(kube.getMachine(NAME))?.reason).toBe('RolledBack');

    // Fixed (a daemon without the fault), and the Machine asks anew: the repave runs.
    expect(await d.stop('SIGTERM')).toBe(0);
    d = await startTestDaemon({ dir, args });
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 2 } });
    await waitUntil(
      'the new repave to succeed',
      () => nodeUpdated(kube.getMachine(NAME))?.reason === 'Succeeded',
      d,
    );
    const updates = await watcherUpdates(d);
    expect(updates.map((u) => u.state)).toEqual(['rolled_back', 'succeeded']);
    expect((await watcher(d)).blocked).toBeNull();
    expect(existsSync(path.join(dir, 'state', 'watcher-blocked-target.json'))).toBe(false);
    expect((kube.getMachine(NAME)?.status?.operations as { repaveCounter: number }).repaveCounter).toBe(2);
  }, 90_000); // two daemons, a rollback and a restart: ~15 s alone, twice that on a busy machine
});
