// Why the fake API server (test/support/fake-kube): other writers between agentd’s read and its patch, and a 500 on one status write, at chosen moments; test/cluster/watcher.test.ts reconciles against kube-apiserver.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMachineApi } from '../../../src/kube/machine.js';
import { BLOCKED_TARGET_FILE, createBlockedTargetFile } from '../../../src/watcher/blocked-target.js';
import { createReconciler } from '../../../src/watcher/reconcile.js';
import type { Reconciler } from '../../../src/watcher/reconcile.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube, KubeObject, TestClock } from '../../support/fake-kube.js';
import { createStubApi, rpcError, silentLogger, stubOp } from './rpc-stub.js';
import type { StubApi } from './rpc-stub.js';

const NAME = 'w1';

function nodeUpdated(m: KubeObject | undefined): Record<string, unknown> | undefined {
  return ((m?.status?.conditions ?? []) as Array<Record<string, unknown>>).find(
    (c) => c.type === 'NodeUpdated',
  );
}

describe('reconcile', () => {
  let kube: FakeKube;
  let clock: TestClock;
  let api: StubApi;
  let reconciler: Reconciler;
  const signal = new AbortController().signal;

  function make(): Reconciler {
    return createReconciler({
      name: NAME,
      machines: createMachineApi({ custom: kube.kubeConfig().makeApiClient(CustomObjectsApi), clock }),
      rpc: api.client,
      clock,
      logger: silentLogger,
    });
  }

  const statusPatches = () =>
    kube.requests
      .filter((r) => r.resource === 'machines/status' && r.verb === 'patch' && r.status === 200)
      .map((r) => (r.body as { status: Record<string, unknown> }).status);

  beforeEach(async () => {
    kube = await startFakeKube();
    clock = createTestClock();
    api = createStubApi();
    kube.putMachine({
      metadata: { name: NAME },
      spec: { kubernetes: { version: 'v1.34.0', bootstrapTokenRef: { name: 't' } } },
    });
    reconciler = make();
  });
  afterEach(async () => {
    await kube.close();
  });

  it('says on the Machine why the update waits in the fleet gate, then goes on', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    let release: () => void = () => {};
    api.onUpdate = async (params) => {
      const key = String(params.idempotencyKey);
      api.running = {
        ...stubOp({ idempotencyKey: key, state: 'running' }),
        wait: { reason: 'OutsideWindow', message: 'next window at 01:00', since: 'now' },
      } as never;
      await new Promise<void>((resolve) => (release = resolve));
      api.running = null;
      return stubOp({ idempotencyKey: key });
    };
    const done = reconciler.reconcile(signal);
    await expect
      .poll(() => nodeUpdated(kube.getMachine(NAME)), { timeout: 5000 })
      .toMatchObject({ status: 'False', reason: 'OutsideWindow', message: 'next window at 01:00' });
    expect(kube.getMachine(NAME)?.status?.phase).toBe('Provisioning');
    release();
    expect(await done).toMatchObject({ outcome: 'updated' });
    expect(nodeUpdated(kube.getMachine(NAME))).toMatchObject({ status: 'True', reason: 'Succeeded' });
  });

  it('calls no update when the Machine asks for what runs, and writes only what runs, once', async () => {
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'in-sync' });
    expect(api.updates()).toEqual([]);
    expect(statusPatches()).toEqual([
      {
        agent: { image: 'img:v1' },
        conditions: [
          {
            type: 'NodeRunning',
            status: 'True',
            reason: 'Running',
            message: 'kube1 runs Kubernetes v1.34.0',
            lastTransitionTime: expect.any(String),
            observedGeneration: 1,
          },
        ],
      },
    ]);
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'in-sync' });
    expect(statusPatches()).toHaveLength(1);
  });

  it('asks the engine for the applied config again only once an operation has ended', async () => {
    const configReads = () => api.calls.filter((c) => c.method === 'config.get').length;
    await reconciler.reconcile(signal);
    await reconciler.reconcile(signal);
    expect(configReads()).toBe(1);
    // An operation changed it (the daemon says so at every operation's end).
    api.applied = { version: '1.35.0', image: 'img:v1' };
    reconciler.appliedMayHaveChanged();
    api.onUpdate = (params) => {
      api.applied = { version: '1.34.0', image: 'img:v1' };
      return stubOp({ idempotencyKey: String(params.idempotencyKey) });
    };
    expect((await reconciler.reconcile(signal)).outcome).toBe('updated');
    expect(api.updates()[0]).toMatchObject({ set: { kubernetesVersion: '1.34.0' } });
  });

  it('writes the last operation that ended, whoever ran it, into LastOperation', async () => {
    api.answered.push(
      stubOp({
        id: 'op-9',
        state: 'rolled_back',
        requestedBy: 'agentctl',
        finishedAt: '2026-01-01T00:00:09.000Z',
        error: { code: 'VERIFY_FAILED', message: 'kubelet not healthy' },
      }),
    );
    await reconciler.reconcile(signal);
    expect(
      (kube.getMachine(NAME)?.status?.conditions as Array<Record<string, unknown>>).find(
        (c) => c.type === 'LastOperation',
      ),
    ).toMatchObject({
      status: 'False',
      reason: 'RolledBack',
      message: 'update op-9 rolled_back at 2026-01-01T00:00:09.000Z: VERIFY_FAILED: kubelet not healthy',
      observedGeneration: 1,
    });
  });

  it('repaves: starts the update with force and the key, then says Provisioning, then Joining and the acknowledgement', async () => {
    const m = kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 2 } });
    // The node need not wait for the status write: the update starts before it.
    let writesBeforeUpdate = -1;
    api.onUpdate = (params, n) => {
      writesBeforeUpdate = statusPatches().length;
      return stubOp({ id: `op-${n}`, idempotencyKey: String(params.idempotencyKey) });
    };
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'updated', operationId: 'op-1' });
    expect(writesBeforeUpdate).toBe(0);
    expect(api.updates()).toEqual([
      {
        force: true,
        wait: false,
        set: { kubernetesVersion: '1.34.0' },
        idempotencyKey: `machine/${m.metadata.uid}/gen-2/repave-2`,
        reason: 'Machine w1: repave requested (repaveCounter 0 → 2)',
      },
    ]);
    const patches = statusPatches();
    expect(patches[0]).toMatchObject({
      phase: 'Provisioning',
      // What runs, said with the first write: the image stays the same after this repave.
      agent: { image: 'img:v1' },
      conditions: [
        { type: 'NodeUpdated', status: 'False', reason: 'InProgress' },
        { type: 'NodeRunning', status: 'True', reason: 'Running' },
      ],
    });
    expect(patches[1]).toMatchObject({
      phase: 'Joining',
      operations: { repaveCounter: 2 },
    });
    expect(nodeUpdated(kube.getMachine(NAME))).toMatchObject({
      status: 'True',
      reason: 'Succeeded',
      observedGeneration: 2,
    });
    // Level-based: the next reconcile finds nothing to do and writes nothing.
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'in-sync' });
    expect(statusPatches()).toHaveLength(2);
  });

  it('goes on with the update when the Provisioning write fails, and writes how it ended', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    kube.failNext(1, { status: 500, match: { resource: 'machines/status', verb: 'patch' } });
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'updated', operationId: 'op-1' });
    expect(api.calls.filter((c) => c.method === 'operations.wait')).toHaveLength(1);
    expect(kube.requests.filter((r) => r.resource === 'machines/status' && r.status === 500)).toHaveLength(1);
    expect(statusPatches()).toHaveLength(1);
    expect(kube.getMachine(NAME)?.status).toMatchObject({
      phase: 'Joining',
      operations: { repaveCounter: 1 },
    });
  });

  it('updates without force on a spec change, and acknowledges no counter', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, {
      kubernetes: { version: 'v1.35.0' },
      agent: { image: 'img:v2' },
    });
    api.onUpdate = (params) => {
      api.applied = { version: '1.35.0', image: 'img:v2' };
      return stubOp({ idempotencyKey: String(params.idempotencyKey) });
    };
    expect((await reconciler.reconcile(signal)).outcome).toBe('updated');
    expect(api.updates()[0]).toMatchObject({
      force: false,
      set: { kubernetesVersion: '1.35.0', image: 'img:v2' },
    });
    const m = kube.getMachine(NAME);
    expect(m?.status).toMatchObject({ phase: 'Joining', agent: { image: 'img:v2' } });
    expect(m?.status?.operations).toBeUndefined();
  });

  it('marks a rolled-back update RolledBack with its reason and does not apply that target again', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    api.onUpdate = () =>
      stubOp({
        state: 'rolled_back',
        error: { code: 'VERIFY_FAILED', message: 'kubelet in kube2 is not active' },
      });
    expect((await reconciler.reconcile(signal)).outcome).toBe('failed');
    const m = kube.getMachine(NAME);
    expect(m?.status).toMatchObject({
      phase: 'Failed',
      message: expect.stringMatching(
        /^agentd: update op-1 rolled back \(VERIFY_FAILED\): not applied again until the Machine asks anew .*: kubelet in kube2 is not active$/,
      ),
    });
    expect(nodeUpdated(m)).toMatchObject({
      status: 'False',
      reason: 'RolledBack',
      message: expect.stringContaining('kubelet in kube2'),
    });
    const writes = statusPatches().length;
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'blocked', operationId: 'op-1' });
    expect(api.updates()).toHaveLength(1);
    expect(statusPatches()).toHaveLength(writes);
    // A new bump is a new request.
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 2 } });
    api.onUpdate = () => stubOp();
    expect((await reconciler.reconcile(signal)).outcome).toBe('updated');
    expect(kube.getMachine(NAME)?.status?.message).toBeUndefined();
  });

  it('marks a failed update Failed and blocks it too; a different target is applied', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { kubernetes: { version: 'v1.35.0' } });
    api.onUpdate = () =>
      stubOp({ state: 'failed', error: { code: 'DOWNLOAD_FAILED', message: 'mirror down' } });
    expect((await reconciler.reconcile(signal)).outcome).toBe('failed');
    expect(nodeUpdated(kube.getMachine(NAME))).toMatchObject({ status: 'False', reason: 'Failed' });
    expect((await reconciler.reconcile(signal)).outcome).toBe('blocked');
    // The same target at a new generation (another spec field changed) is still the same request.
    kube.patchMachineSpecAsOtherWriter(NAME, { kubernetes: { version: '1.35.0' } });
    expect((await reconciler.reconcile(signal)).outcome).toBe('blocked');
    expect(api.updates()).toHaveLength(1);
    kube.patchMachineSpecAsOtherWriter(NAME, { kubernetes: { version: 'v1.35.1' } });
    api.onUpdate = () => stubOp();
    expect((await reconciler.reconcile(signal)).outcome).toBe('updated');
    expect(api.updates().map((u) => (u.set as { kubernetesVersion: string }).kubernetesVersion)).toEqual([
      '1.35.0',
      '1.35.1',
    ]);
  });

  it('keeps the block across a restart of agentd (the record in the state dir), until the Machine asks anew', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-blocked-'));
    try {
      const withStore = (): Reconciler =>
        createReconciler({
          name: NAME,
          machines: createMachineApi({ custom: kube.kubeConfig().makeApiClient(CustomObjectsApi), clock }),
          rpc: api.client,
          clock,
          logger: silentLogger,
          blocked: createBlockedTargetFile(dir, silentLogger),
        });
      kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
      api.onUpdate = () =>
        stubOp({
          state: 'rolled_back',
          error: { code: 'HEALTH_GATE_FAILED', message: 'node-ready: not Ready' },
        });
      expect((await withStore().reconcile(signal)).outcome).toBe('failed');
      expect(JSON.parse(await readFile(path.join(dir, BLOCKED_TARGET_FILE), 'utf8'))).toMatchObject({
        repaveCounter: 1,
        outcome: 'rolled_back',
        code: 'HEALTH_GATE_FAILED',
        operationId: 'op-1',
      });
      // A new daemon (a new reconciler, no memory of its own) reads the record and does not retry.
      const seen: unknown[] = [];
      const restarted = createReconciler({
        name: NAME,
        machines: createMachineApi({ custom: kube.kubeConfig().makeApiClient(CustomObjectsApi), clock }),
        rpc: api.client,
        clock,
        logger: silentLogger,
        blocked: createBlockedTargetFile(dir, silentLogger),
        onBlocked: (b) => seen.push(b?.code ?? null),
      });
      expect((await restarted.reconcile(signal)).outcome).toBe('blocked');
      expect(seen).toEqual(['HEALTH_GATE_FAILED']);
      expect(api.updates()).toHaveLength(1);
      expect(nodeUpdated(kube.getMachine(NAME))).toMatchObject({ reason: 'RolledBack' });
      // The Machine asks anew: the block is lifted, its file removed, and the repave runs.
      kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 2 } });
      api.onUpdate = () => stubOp();
      expect((await withStore().reconcile(signal)).outcome).toBe('updated');
      await expect(readFile(path.join(dir, BLOCKED_TARGET_FILE))).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reports an update the API refuses as Failed, but retries DRAINING and requeues BUSY', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { kubernetes: { version: 'vbad' } });
    api.onUpdate = () => rpcError('INVALID_PARAMS', 'update: invalid params: set.kubernetesVersion');
    expect((await reconciler.reconcile(signal)).outcome).toBe('failed');
    expect(kube.getMachine(NAME)?.status?.phase).toBe('Failed');

    kube.patchMachineSpecAsOtherWriter(NAME, { kubernetes: { version: 'v1.35.0' } });
    api.onUpdate = () => rpcError('DRAINING');
    await expect(reconciler.reconcile(signal)).rejects.toMatchObject({ appCode: 'DRAINING' });
    api.onUpdate = () => rpcError('BUSY');
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'busy', requeueAfterMs: 250 });
  });

  it('waits for an operation someone else runs once its update is refused BUSY, then looks again', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    api.running = stubOp({ id: 'op-admin', state: 'running', requestedBy: 'agentctl' });
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'busy', requeueAfterMs: 250 });
    expect(api.calls.map((c) => c.method)).toEqual(['config.get', 'update', 'status', 'operations.wait']);
    expect(api.calls[3]?.params).toEqual({ id: 'op-admin', timeoutSeconds: 30 });
    expect(statusPatches()).toEqual([]);
  });

  it('does not drive a node that has not joined', async () => {
    api.applied = null;
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'not-joined' });
    expect(api.updates()).toEqual([]);
  });

  it('reports a missing Machine', async () => {
    kube.deleteMachine(NAME);
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'missing' });
  });

  it('asks again under a new key when an earlier daemon cancelled or interrupted the update', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    const before = new Date(clock.now() - 60_000).toISOString();
    api.onUpdate = (params, n) =>
      n === 1
        ? stubOp({
            id: 'op-old',
            state: 'interrupted',
            finishedAt: before,
            idempotencyKey: String(params.idempotencyKey),
          })
        : stubOp({ id: 'op-new', idempotencyKey: String(params.idempotencyKey) });
    expect(await reconciler.reconcile(signal)).toEqual({ outcome: 'updated', operationId: 'op-new' });
    const keys = api.updates().map((u) => String(u.idempotencyKey));
    expect(keys[1]).toBe(`${keys[0]}/attempt-2`);
  });

  it('treats a cancel that happened while it watched as the answer', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    const later = new Date(clock.now() + 1000).toISOString();
    api.onUpdate = () =>
      stubOp({ state: 'cancelled', finishedAt: later, error: { code: 'CANCELLED', message: 'cancelled' } });
    expect((await reconciler.reconcile(signal)).outcome).toBe('failed');
    expect(api.updates()).toHaveLength(1);
  });

  it('finishes a NodeUpdated=InProgress left over by a stopped watcher', async () => {
    kube.patchMachineStatusAsOtherWriter(NAME, {
      phase: 'Provisioning',
      conditions: [
        { type: 'NodeUpdated', status: 'False', reason: 'InProgress', message: 'x', observedGeneration: 1 },
      ],
    });
    api.onUpdate = () => stubOp({ result: { changed: false } });
    expect((await reconciler.reconcile(signal)).outcome).toBe('updated');
    expect(api.updates()[0]).toMatchObject({ force: false });
    expect(nodeUpdated(kube.getMachine(NAME))).toMatchObject({
      status: 'True',
      message: 'update op-1 succeeded (nothing to change)',
    });
  });

  it('gives up waiting when stopped', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    const controller = new AbortController();
    api.onUpdate = () => new Promise(() => undefined);
    const pending = reconciler.reconcile(controller.signal);
    for (let i = 0; i < 100 && api.updates().length === 0; i += 1) await new Promise((r) => setImmediate(r));
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('survives a status conflict from another writer without losing the acknowledgement', async () => {
    kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: 1 } });
    kube.beforeNext(
      { resource: 'machines/status', verb: 'patch' },
      () => {
        kube.patchMachineStatusAsOtherWriter(NAME, { operations: { rebootCounter: 7 } });
      },
      2,
    );
    expect((await reconciler.reconcile(signal)).outcome).toBe('updated');
    expect(kube.getMachine(NAME)?.status?.operations).toEqual({ repaveCounter: 1, rebootCounter: 7 });
  });
});
