/** The operation history: newest first, bounded on disk, reloadable, idempotency lookups. */
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Operation } from '../../../src/engine/operation.js';
import { OperationStore, newOperationId } from '../../../src/engine/operation-store.js';

let stateDir: string;
beforeEach(async () => {
  stateDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-ops-'));
});
afterEach(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

const T0 = Date.UTC(2026, 0, 1);

function op(i: number, extra: Partial<Operation> = {}): Operation {
  return {
    id: newOperationId(T0 + i * 1000),
    kind: 'update',
    state: 'succeeded',
    reason: null,
    requestedBy: 'test',
    idempotencyKey: null,
    createdAt: new Date(T0 + i * 1000).toISOString(),
    startedAt: null,
    finishedAt: null,
    from: null,
    to: 'kube1',
    phases: [],
    result: null,
    error: null,
    ...extra,
  };
}

describe('OperationStore', () => {
  it('ids sort by time', () => {
    const ids = [newOperationId(T0 + 5), newOperationId(T0 + 1_000_000), newOperationId(T0)];
    expect([...ids].sort()).toEqual([ids[2], ids[0], ids[1]]);
  });

  it('lists newest first, filters by state and limit, and updates in place', async () => {
    const store = new OperationStore(stateDir);
    const ops = [op(1), op(2, { state: 'failed' }), op(3)];
    for (const o of ops) await store.save(o);
    expect(store.list().map((o) => o.id)).toEqual([ops[2]!.id, ops[1]!.id, ops[0]!.id]);
    expect(store.list({ state: 'failed' }).map((o) => o.id)).toEqual([ops[1]!.id]);
    expect(store.list({ limit: 1 }).map((o) => o.id)).toEqual([ops[2]!.id]);
    await store.save({ ...ops[0]!, state: 'interrupted' });
    expect(store.get(ops[0]!.id)?.state).toBe('interrupted');
    expect(store.list()).toHaveLength(3);
  });

  it('saves a snapshot: later changes to the object are not in the store until saved', async () => {
    const store = new OperationStore(stateDir);
    const o = op(1, { state: 'running' });
    await store.save(o);
    o.state = 'failed';
    expect(store.get(o.id)?.state).toBe('running');
  });

  it('keeps only the newest `limit` operations, on disk too', async () => {
    const store = new OperationStore(stateDir, { limit: 3 });
    const ops = Array.from({ length: 5 }, (_, i) => op(i));
    for (const o of ops) await store.save(o);
    expect(store.list().map((o) => o.id)).toEqual(
      ops
        .slice(2)
        .reverse()
        .map((o) => o.id),
    );
    const files = (await readdir(path.join(stateDir, 'operations'))).sort();
    expect(files).toEqual(ops.slice(2).map((o) => `${o.id}.json`));
  });

  it('reloads from disk in creation order and skips unreadable records', async () => {
    const first = new OperationStore(stateDir);
    const ops = [op(3), op(1), op(2)];
    for (const o of ops) await first.save(o);
    await writeFile(path.join(stateDir, 'operations', 'op-garbage.json'), '{ not json');
    const again = new OperationStore(stateDir);
    await again.load();
    expect(again.list().map((o) => o.id)).toEqual([ops[0]!.id, ops[2]!.id, ops[1]!.id]);
  });

  it('load of a state dir with no history is empty, not an error', async () => {
    const store = new OperationStore(path.join(stateDir, 'fresh'));
    await store.load();
    expect(store.list()).toEqual([]);
  });

  it('finds an operation by idempotency key', async () => {
    const store = new OperationStore(stateDir);
    const keyed = op(1, { idempotencyKey: 'k-1' });
    await store.save(keyed);
    await store.save(op(2));
    expect(store.findByIdempotencyKey('k-1')?.id).toBe(keyed.id);
    expect(store.findByIdempotencyKey('k-2')).toBeUndefined();
  });

  it('concurrent saves of one operation leave the last one on disk', async () => {
    const store = new OperationStore(stateDir);
    const o = op(1, { state: 'running' });
    await Promise.all([
      store.save(o),
      store.save({ ...o, state: 'failed' }),
      store.save({ ...o, state: 'succeeded' }),
    ]);
    const reloaded = new OperationStore(stateDir);
    await reloaded.load();
    expect(reloaded.get(o.id)?.state).toBe('succeeded');
  });
});
