// Why the fake API server (test/support/fake-kube): no fault beyond a CRD installed at a chosen moment: the whole watcher on the injected clock; test/cluster/watcher.test.ts runs it against kube-apiserver.
/**
 * The whole watcher in process: the real Machine client and watch against the fake API server,
 * a scripted API behind the rpc client, and the test clock for every backoff.
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import { createMachineApi } from '../../../src/kube/machine.js';
import { createMachineWatch } from '../../../src/kube/watch.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { createMachineWatcher } from '../../../src/watcher/watcher.js';
import type { MachineWatcher } from '../../../src/watcher/watcher.js';
import type { ReconcileResult } from '../../../src/watcher/reconcile.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube, FakeKubeOptions } from '../../support/fake-kube.js';
import { createStubApi, silentLogger, stubOp } from './rpc-stub.js';
import type { StubApi } from './rpc-stub.js';

const NAME = 'worker-01';

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('createMachineWatcher', () => {
  let kube: FakeKube;
  let api: StubApi;
  let watcher: MachineWatcher | undefined;
  let joined = true;
  const metrics = createMetrics({ version: 't', collectDefaults: false });

  /** Every reconcile's result, in order. */
  let results: Array<ReconcileResult & { resourceVersion: string | null }> = [];
  /** Resolves once a reconcile that read the Machine as the server has it now found it in sync. */
  const inSyncWithServer = (): Promise<void> =>
    until('a reconcile of the Machine as it is now', () =>
      results.some(
        (r) =>
          r.outcome === 'in-sync' && r.resourceVersion === kube.getMachine(NAME)?.metadata.resourceVersion,
      ),
    );

  async function start(options: FakeKubeOptions = {}): Promise<MachineWatcher> {
    results = [];
    kube = await startFakeKube(options);
    const kc = kube.kubeConfig();
    watcher = createMachineWatcher({
      machineName: NAME,
      machines: createMachineApi({ custom: kc.makeApiClient(CustomObjectsApi), clock: createTestClock() }),
      machineWatch: createMachineWatch({ kc }),
      rpc: api.client,
      registrationConfig: () => (joined ? agentConfigSchema.parse(makeAgentConfig()) : null),
      logger: silentLogger,
      metrics,
      clock: createTestClock(),
      backoff: { baseMs: 10, maxMs: 50, random: () => 0 },
      onReconciled: (r, resourceVersion) => results.push({ ...r, resourceVersion }),
    });
    watcher.start();
    return watcher;
  }

  beforeEach(() => {
    // What the node runs matches what it registers with: no drift until the tests make some.
    api = createStubApi({
      version: '1.34.0',
      image: 'img:v1',
      labels: { 'unbounded-cloud.io/site': 'test' },
    });
    joined = true;
  });
  afterEach(async () => {
    await watcher?.stop();
    watcher = undefined;
    await kube.close();
  });

  it('reconciles and writes from the Machine its watch delivered: a repave reads nothing back', async () => {
    const w = await start();
    await until('the first reconcile', () => w.status().lastReconcileAt !== null);
    await inSyncWithServer();
    const reads = (): number => kube.countRequests({ resource: 'machines', verb: 'get' });
    const before = reads();
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    await until(
      'the acknowledgement',
      () => (kube.getMachine(NAME)?.status?.operations as { repaveCounter?: number })?.repaveCounter === 1,
    );
    // Its own writes come back as events and are reconciled too, from the same cache.
    await inSyncWithServer();
    expect(api.updates()).toHaveLength(1);
    expect(reads()).toBe(before);
    expect(kube.countRequests({ resource: 'machines/status', verb: 'patch' })).toBeGreaterThan(1);
  });

  it('registers the missing Machine, reconciles once, and repaves on a bump', async () => {
    const w = await start();
    await until('the watch', () => w.status().connected);
    expect(kube.getMachine(NAME)?.spec).toMatchObject({
      kubernetes: { version: 'v1.34.0', bootstrapTokenRef: { name: 'bootstrap-token-abc123' } },
    });
    await until('the first reconcile', () => w.status().lastReconcileAt !== null);
    expect(api.updates()).toEqual([]);

    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    await until('the acknowledgement', () => kube.getMachine(NAME)?.status?.phase === 'Joining');
    expect(api.updates()).toHaveLength(1);
    expect(api.updates()[0]).toMatchObject({ force: true, wait: false });
    expect(w.status()).toMatchObject({ enabled: true, machineName: NAME, connected: true, lastError: null });
    expect(w.status().lastEventAt).not.toBeNull();

    await w.stop();
    // Stopped: its watch is closed at the server, so no later change of the Machine reaches it.
    await until('the watch to close', () => kube.openWatches === 0);
    const calls = api.calls.length;
    const reconciles = results.length;
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 2 } });
    expect(kube.openWatches).toBe(0);
    expect(api.calls).toHaveLength(calls);
    expect(results).toHaveLength(reconciles);
    expect(w.status().connected).toBe(false);
  });

  it('coalesces bumps that arrive while an update runs into one more update', async () => {
    const w = await start();
    await until('the watch', () => w.status().connected);
    let release: () => void = () => undefined;
    api.onUpdate = (params, n) =>
      n === 1
        ? new Promise((resolve) => {
            release = () => resolve(stubOp({ idempotencyKey: String(params.idempotencyKey) }));
          })
        : stubOp({ id: `op-${n}`, idempotencyKey: String(params.idempotencyKey) });
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    await until('the first update', () => api.updates().length === 1);
    const modified = async (): Promise<number> =>
      (await metrics.watchEvents.get()).values.find((v) => v.labels.type === 'MODIFIED')?.value ?? 0;
    const before = await modified();
    for (const n of [2, 3, 4]) kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: n } });
    // All three events reach the watcher while the first update is still running.
    for (let i = 0; i < 2000 && (await modified()) < before + 3; i += 1)
      await new Promise((r) => setTimeout(r, 5));
    expect(await modified()).toBeGreaterThanOrEqual(before + 3);
    expect(api.updates()).toHaveLength(1);
    release();
    await until('the last acknowledgement', () => {
      const ops = kube.getMachine(NAME)?.status?.operations as { repaveCounter?: number } | undefined;
      return ops?.repaveCounter === 4;
    });
    // The acknowledgement's own event was reconciled, and found nothing more to do.
    await inSyncWithServer();
    expect(api.updates().map((u) => String(u.idempotencyKey).split('/').pop())).toEqual([
      'repave-1',
      'repave-4',
    ]);
  });

  it('reports a missing CRD and recovers when it is installed', async () => {
    const w = await start({ crdInstalled: { 'unbounded-cloud.io': false } });
    await until('the error', () => w.status().lastErrorCode === 'KUBE_UNAVAILABLE');
    expect(w.status().lastError).toContain('machines.unbounded-cloud.io');
    expect(w.status().connected).toBe(false);
    kube.setCrdInstalled('unbounded-cloud.io', true);
    await until('the watch', () => w.status().connected);
    expect(kube.getMachine(NAME)).toBeDefined();
  });

  it('does not register before the node has joined', async () => {
    joined = false;
    const w = await start();
    await until('the error', () => w.status().lastErrorCode === 'PRECONDITION_FAILED');
    expect(kube.getMachine(NAME)).toBeUndefined();
    joined = true;
    await until('the watch', () => w.status().connected);
  });
});
