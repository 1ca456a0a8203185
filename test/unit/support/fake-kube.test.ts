// Why the fake API server (test/support/fake-kube): the tests of the fake API server itself.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from '@kubernetes/client-node';
import { startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube, Json, KubeObject } from '../../support/fake-kube.js';

const GROUP = 'unbounded-cloud.io';
const machines = { group: GROUP, version: 'v1alpha3', plural: 'machines' };
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

function machineBody(name: string, extra: Json = {}): Json {
  return {
    apiVersion: `${GROUP}/v1alpha3`,
    kind: 'Machine',
    metadata: { name },
    spec: { kubernetes: { version: 'v1.34.0', bootstrapTokenRef: { name: 'bootstrap-token-abc123' } } },
    ...extra,
  };
}

/** The HTTP code and the parsed Status of a failed client call. */
async function failure(promise: Promise<unknown>): Promise<{ code: number; status: Json }> {
  try {
    await promise;
  } catch (err) {
    if (!(err instanceof ApiException)) throw err;
    const body: unknown = err.body;
    const status = typeof body === 'string' && body.startsWith('{') ? (JSON.parse(body) as Json) : {};
    return { code: err.code, status };
  }
  throw new Error('expected the call to fail');
}

interface WatchLine {
  type: string;
  object: KubeObject;
}

/** Start a real client-node watch and collect its events; `done` resolves when the stream ends. */
async function collectWatch(kube: FakeKube, path: string, query: Record<string, string>) {
  const events: WatchLine[] = [];
  let resolveDone: (err: unknown) => void = () => undefined;
  const done = new Promise<unknown>((resolve) => (resolveDone = resolve));
  const controller = await new Watch(kube.kubeConfig()).watch(
    path,
    query,
    (type, object: KubeObject) => events.push({ type, object }),
    (err: unknown) => resolveDone(err),
  );
  return { events, done, controller };
}

/** Resolve once `events` holds at least `n` entries (each watch line is pushed synchronously). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setImmediate(resolve));
}

describe('fake kube API server', () => {
  let kube: FakeKube;
  let custom: CustomObjectsApi;
  let core: CoreV1Api;

  beforeEach(async () => {
    kube = await startFakeKube();
    custom = kube.kubeConfig().makeApiClient(CustomObjectsApi);
    core = kube.kubeConfig().makeApiClient(CoreV1Api);
  });
  afterEach(async () => {
    await kube.close();
  });

  describe('Machine objects', () => {
    it('creates with uid, creationTimestamp and generation 1, ignoring status', async () => {
      const created = (await custom.createClusterCustomObject({
        ...machines,
        body: machineBody('worker-01', { status: { phase: 'Ready' } }),
      })) as KubeObject;
      expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
      expect(created.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(created.metadata.generation).toBe(1);
      expect(created.status).toBeUndefined();
      const read = (await custom.getClusterCustomObject({ ...machines, name: 'worker-01' })) as KubeObject;
      expect(read).toEqual(created);
    });

    it('answers 409 AlreadyExists on a second create and 404 NotFound naming a missing object', async () => {
      await custom.createClusterCustomObject({ ...machines, body: machineBody('worker-01') });
      const dup = await failure(
        custom.createClusterCustomObject({ ...machines, body: machineBody('worker-01') }),
      );
      expect(dup).toMatchObject({ code: 409, status: { kind: 'Status', reason: 'AlreadyExists' } });
      const missing = await failure(custom.getClusterCustomObject({ ...machines, name: 'nope' }));
      expect(missing).toMatchObject({
        code: 404,
        status: { reason: 'NotFound', details: { name: 'nope', group: GROUP } },
      });
    });

    it('validates like the CRD schema (bootstrapTokenRef required, phase enum)', async () => {
      const bad = await failure(
        custom.createClusterCustomObject({
          ...machines,
          body: { metadata: { name: 'w' }, spec: { kubernetes: { version: 'v1.34.0' } } },
        }),
      );
      expect(bad).toMatchObject({ code: 422, status: { reason: 'Invalid' } });
      kube.putMachine({ metadata: { name: 'w' } });
      const phase = await failure(
        custom.patchClusterCustomObjectStatus(
          { ...machines, name: 'w', body: { status: { phase: 'Bogus' } } },
          merge,
        ),
      );
      expect(phase.code).toBe(422);
    });

    it('keeps the status subresource split: main writes ignore status, /status writes ignore the rest', async () => {
      kube.putMachine({
        metadata: { name: 'w' },
        spec: machineBody('w').spec as Json,
        status: { phase: 'Pending' },
      });
      const afterMain = (await custom.patchClusterCustomObject(
        {
          ...machines,
          name: 'w',
          body: { spec: { operations: { repaveCounter: 1 } }, status: { phase: 'Ready' } },
        },
        merge,
      )) as KubeObject;
      expect(afterMain.status).toEqual({ phase: 'Pending' });
      expect(afterMain.spec).toMatchObject({ operations: { repaveCounter: 1 } });
      expect(afterMain.metadata.generation).toBe(2);

      const afterStatus = (await custom.patchClusterCustomObjectStatus(
        {
          ...machines,
          name: 'w',
          body: { spec: { operations: { repaveCounter: 9 } }, status: { phase: 'Ready' } },
        },
        merge,
      )) as KubeObject;
      expect(afterStatus.status).toEqual({ phase: 'Ready' });
      expect(afterStatus.spec).toMatchObject({ operations: { repaveCounter: 1 } });
      expect(afterStatus.metadata.generation).toBe(2);
      expect(Number(afterStatus.metadata.resourceVersion)).toBeGreaterThan(
        Number(afterMain.metadata.resourceVersion),
      );
    });

    it('does not bump the resourceVersion for a write that changes nothing', async () => {
      const before = kube.putMachine({ metadata: { name: 'w' }, status: { phase: 'Ready' } });
      const after = (await custom.patchClusterCustomObjectStatus(
        { ...machines, name: 'w', body: { status: { phase: 'Ready' } } },
        merge,
      )) as KubeObject;
      expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    });

    it('answers 409 Conflict to a merge patch or PUT with a stale resourceVersion, 422 to a PUT without one', async () => {
      const first = kube.putMachine({ metadata: { name: 'w' } });
      kube.patchMachineStatusAsOtherWriter('w', { phase: 'Ready' });
      const patch = await failure(
        custom.patchClusterCustomObjectStatus(
          {
            ...machines,
            name: 'w',
            body: {
              metadata: { resourceVersion: first.metadata.resourceVersion },
              status: { phase: 'Failed' },
            },
          },
          merge,
        ),
      );
      expect(patch).toMatchObject({ code: 409, status: { reason: 'Conflict' } });
      const put = await failure(custom.replaceClusterCustomObject({ ...machines, name: 'w', body: first }));
      expect(put.code).toBe(409);
      const { resourceVersion: _rv, ...meta } = first.metadata;
      const unconditional = await failure(
        custom.replaceClusterCustomObject({ ...machines, name: 'w', body: { ...first, metadata: meta } }),
      );
      expect(unconditional.code).toBe(422);
      expect(kube.getMachine('w')?.status).toEqual({ phase: 'Ready' });
    });

    it('applies JSON patches (and a failing test op fails the whole patch)', async () => {
      kube.putMachine({ metadata: { name: 'w' }, status: { phase: 'Pending', conditions: [] } });
      const patched = (await custom.patchClusterCustomObjectStatus(
        {
          ...machines,
          name: 'w',
          body: [
            { op: 'replace', path: '/status/phase', value: 'Provisioning' },
            { op: 'add', path: '/status/conditions/-', value: { type: 'NodeUpdated', status: 'False' } },
          ],
        },
        jsonPatch,
      )) as KubeObject;
      expect(patched.status).toEqual({
        phase: 'Provisioning',
        conditions: [{ type: 'NodeUpdated', status: 'False' }],
      });
      const failed = await failure(
        custom.patchClusterCustomObjectStatus(
          {
            ...machines,
            name: 'w',
            body: [
              { op: 'replace', path: '/status/phase', value: 'Ready' },
              { op: 'test', path: '/status/phase', value: 'Joining' },
            ],
          },
          jsonPatch,
        ),
      );
      expect(failed.code).toBe(422);
      expect(kube.getMachine('w')?.status?.phase).toBe('Provisioning');
    });

    it('refuses strategic merge patches on custom resources with 415, like a real server', async () => {
      kube.putMachine({ metadata: { name: 'w' } });
      const res = await failure(
        custom.patchClusterCustomObject(
          { ...machines, name: 'w', body: { metadata: { labels: { a: 'b' } } } },
          strategic,
        ),
      );
      expect(res).toMatchObject({ code: 415, status: { reason: 'UnsupportedMediaType' } });
    });

    it('serves both groups and answers 404 for the whole group when its CRD is not installed', async () => {
      await kube.close();
      kube = await startFakeKube({ crdInstalled: { 'unbounded-cloud.io': false } });
      custom = kube.kubeConfig().makeApiClient(CustomObjectsApi);
      const missing = await failure(custom.getClusterCustomObject({ ...machines, name: 'w' }));
      expect(missing).toMatchObject({ code: 404, status: { reason: 'NotFound', details: {} } });
      expect((missing.status.details as Json).name).toBeUndefined();
      const old = { ...machines, group: 'unbounded-kube.io' };
      await custom.createClusterCustomObject({
        ...old,
        body: { ...machineBody('w'), apiVersion: 'unbounded-kube.io/v1alpha3' },
      });
      expect(kube.getMachine('w', 'unbounded-kube.io')).toBeDefined();
      kube.setCrdInstalled('unbounded-cloud.io', true);
      await expect(custom.listClusterCustomObject(machines)).resolves.toMatchObject({ items: [] });
    });

    it('lists with metadata.resourceVersion and a name field selector', async () => {
      kube.putMachine({ metadata: { name: 'a' } });
      kube.putMachine({ metadata: { name: 'b' } });
      const list = (await custom.listClusterCustomObject({
        ...machines,
        fieldSelector: 'metadata.name=b',
      })) as Json;
      expect((list.metadata as Json).resourceVersion).toBe(kube.resourceVersion);
      expect((list.items as KubeObject[]).map((m) => m.metadata.name)).toEqual(['b']);
      const bad = await failure(custom.listClusterCustomObject({ ...machines, fieldSelector: 'spec.foo=x' }));
      expect(bad.code).toBe(400);
    });
  });

  describe('watch', () => {
    const path = `/apis/${GROUP}/v1alpha3/machines`;

    it('replays events after the resourceVersion, filters by name and follows live writes', async () => {
      const start = kube.putMachine({ metadata: { name: 'w' } });
      kube.putMachine({ metadata: { name: 'other' } });
      kube.patchMachineStatusAsOtherWriter('w', { phase: 'Pending' });
      const w = await collectWatch(kube, path, {
        resourceVersion: start.metadata.resourceVersion!,
        fieldSelector: 'metadata.name=w',
      });
      await kube.whenWatching(1);
      kube.patchMachineStatusAsOtherWriter('other', { phase: 'Ready' });
      kube.patchMachineStatusAsOtherWriter('w', { phase: 'Ready' });
      kube.deleteMachine('w');
      await until(() => w.events.length >= 3);
      expect(w.events.map((e) => [e.type, e.object.metadata.name, e.object.status?.phase])).toEqual([
        ['MODIFIED', 'w', 'Pending'],
        ['MODIFIED', 'w', 'Ready'],
        ['DELETED', 'w', 'Ready'],
      ]);
      w.controller.abort();
    });

    it('sends the current objects as ADDED when no resourceVersion is given', async () => {
      kube.putMachine({ metadata: { name: 'w' } });
      const w = await collectWatch(kube, path, {});
      await until(() => w.events.length >= 1);
      expect(w.events[0]).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'w' } } });
      w.controller.abort();
    });

    it('sends BOOKMARK events on demand only to watches that allow them', async () => {
      const m = kube.putMachine({ metadata: { name: 'w' } });
      const withBookmarks = await collectWatch(kube, path, {
        resourceVersion: m.metadata.resourceVersion!,
        allowWatchBookmarks: 'true',
      });
      const without = await collectWatch(kube, path, { resourceVersion: m.metadata.resourceVersion! });
      await kube.whenWatching(2);
      kube.putMachine({ metadata: { name: 'x' } });
      kube.sendBookmarks();
      await until(() => withBookmarks.events.length >= 2 && without.events.length >= 1);
      expect(withBookmarks.events[1]).toMatchObject({
        type: 'BOOKMARK',
        object: { kind: 'Machine', metadata: { resourceVersion: kube.resourceVersion } },
      });
      expect(without.events.map((e) => e.type)).toEqual(['ADDED']);
      withBookmarks.controller.abort();
      without.controller.abort();
    });

    it('answers an ERROR event with a 410 Expired Status for a compacted resourceVersion, then ends', async () => {
      const m = kube.putMachine({ metadata: { name: 'w' } });
      kube.patchMachineStatusAsOtherWriter('w', { phase: 'Ready' });
      kube.compactHistory();
      const w = await collectWatch(kube, path, { resourceVersion: m.metadata.resourceVersion! });
      expect(await w.done).toBeNull();
      expect(w.events).toEqual([
        { type: 'ERROR', object: expect.objectContaining({ kind: 'Status', code: 410, reason: 'Expired' }) },
      ]);
      // The current version is still watchable.
      const fresh = await collectWatch(kube, path, { resourceVersion: kube.resourceVersion });
      await kube.whenWatching(1);
      fresh.controller.abort();
    });

    it('expires versions that fell out of a bounded history', async () => {
      await kube.close();
      kube = await startFakeKube({ watchHistoryLimit: 2 });
      const m = kube.putMachine({ metadata: { name: 'w' } });
      for (const phase of ['Pending', 'Provisioning', 'Joining'])
        kube.patchMachineStatusAsOtherWriter('w', { phase });
      const w = await collectWatch(kube, path, { resourceVersion: m.metadata.resourceVersion! });
      await w.done;
      expect(w.events[0]?.object).toMatchObject({ code: 410 });
    });

    it('sends BOOKMARK events periodically when configured', async () => {
      await kube.close();
      kube = await startFakeKube({ bookmarkIntervalMs: 5 });
      const w = await collectWatch(kube, path, {
        resourceVersion: kube.resourceVersion,
        allowWatchBookmarks: 'true',
      });
      await until(() => w.events.length >= 2);
      expect(w.events.slice(0, 2).map((e) => e.type)).toEqual(['BOOKMARK', 'BOOKMARK']);
      w.controller.abort();
    });

    it('cuts open streams on demand, which ends the client watch', async () => {
      const w = await collectWatch(kube, path, { resourceVersion: kube.resourceVersion });
      await kube.whenWatching(1);
      expect(kube.cutWatches()).toBe(1);
      expect(await w.done).toBeNull();
      expect(kube.openWatches).toBe(0);
    });
  });

  describe('auth', () => {
    it('answers 401 to a missing or wrong token', async () => {
      const wrong = kube.kubeConfig('not-the-token').makeApiClient(CoreV1Api);
      expect((await failure(wrong.readNode({ name: 'n1' }))).code).toBe(401);
      const res = await fetch(`${kube.url}/api/v1/nodes`);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ kind: 'Status', reason: 'Unauthorized' });
    });

    it('answers 403 Forbidden naming verb and resource to a restricted token', async () => {
      kube.setToken('reader', {
        user: 'system:bootstrap:reader',
        rules: [{ verbs: ['get'], resources: ['machines'] }],
      });
      kube.putMachine({ metadata: { name: 'w' } });
      const reader = kube.kubeConfig('reader').makeApiClient(CustomObjectsApi);
      await expect(reader.getClusterCustomObject({ ...machines, name: 'w' })).resolves.toBeDefined();
      const denied = await failure(
        reader.patchClusterCustomObjectStatus(
          { ...machines, name: 'w', body: { status: { phase: 'Ready' } } },
          merge,
        ),
      );
      expect(denied).toMatchObject({ code: 403, status: { reason: 'Forbidden' } });
      expect(denied.status.message).toContain(
        'cannot patch resource "machines/status" in API group "unbounded-cloud.io"',
      );
    });
  });

  describe('nodes, pods and eviction', () => {
    it('patches a node with merge and strategic merge patches', async () => {
      kube.addNode('n1');
      await core.patchNode({ name: 'n1', body: { spec: { unschedulable: true } } }, merge);
      expect(kube.getNode('n1')?.spec).toEqual({ unschedulable: true });
      await core.patchNode({ name: 'n1', body: { metadata: { annotations: { a: 'b' } } } }, strategic);
      expect(kube.getNode('n1')?.metadata.annotations).toEqual({ a: 'b' });
    });

    it('lists the pods of a node by field selector', async () => {
      kube.addNode('n1');
      kube.addPod({ name: 'a', nodeName: 'n1' });
      kube.addPod({
        name: 'b',
        namespace: 'kube-system',
        nodeName: 'n1',
        owner: { kind: 'DaemonSet', name: 'ds' },
      });
      kube.addPod({ name: 'c', nodeName: 'n2' });
      const list = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=n1' });
      expect(list.items.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)).toEqual([
        'default/a',
        'kube-system/b',
      ]);
      expect(list.items[1]?.metadata?.ownerReferences?.[0]).toMatchObject({
        kind: 'DaemonSet',
        controller: true,
      });
    });

    it('refuses an eviction with 429 while a PDB allows no disruption, then evicts and deletes', async () => {
      kube.addPod({ name: 'web-1', nodeName: 'n1', labels: { app: 'web' } });
      kube.addPdb({ name: 'web', selector: { matchLabels: { app: 'web' } }, disruptionsAllowed: 0 });
      const body = {
        apiVersion: 'policy/v1',
        kind: 'Eviction',
        metadata: { name: 'web-1', namespace: 'default' },
      };
      const refused = await failure(
        core.createNamespacedPodEviction({ name: 'web-1', namespace: 'default', body }),
      );
      expect(refused).toMatchObject({ code: 429, status: { reason: 'TooManyRequests' } });
      expect(kube.getPod('default', 'web-1')).toBeDefined();

      kube.setPdbDisruptionsAllowed('default', 'web', 1);
      await core.createNamespacedPodEviction({ name: 'web-1', namespace: 'default', body });
      expect(kube.getPod('default', 'web-1')).toBeUndefined();
      expect(kube.getPdb('default', 'web')?.status?.disruptionsAllowed).toBe(0);
      const gone = await failure(
        core.createNamespacedPodEviction({ name: 'web-1', namespace: 'default', body }),
      );
      expect(gone.code).toBe(404);
    });

    it('keeps an evicted pod terminating for the configured delay', async () => {
      await kube.close();
      kube = await startFakeKube({ podDeletionDelayMs: 60_000 });
      core = kube.kubeConfig().makeApiClient(CoreV1Api);
      kube.addPod({ name: 'p', nodeName: 'n1' });
      await core.createNamespacedPodEviction({
        name: 'p',
        namespace: 'default',
        body: { metadata: { name: 'p' } },
      });
      expect(kube.getPod('default', 'p')?.metadata.deletionTimestamp).toBeDefined();
    });
  });

  describe('fault injection and the request log', () => {
    it('fails the next matching requests with 503, then recovers', async () => {
      kube.addNode('n1');
      kube.failNext(2, { match: { verb: 'get', resource: 'nodes' } });
      expect((await failure(core.readNode({ name: 'n1' }))).code).toBe(503);
      expect((await failure(core.readNode({ name: 'n1' }))).code).toBe(503);
      await expect(core.readNode({ name: 'n1' })).resolves.toBeDefined();
      expect(kube.countRequests({ verb: 'get', resource: 'nodes' })).toBe(3);
      expect(kube.requests.map((r) => r.status)).toEqual([503, 503, 200]);
    });

    it('delays matching requests until the delay is lifted', async () => {
      kube.addNode('slow');
      kube.addNode('fast');
      const lift = kube.delay(500, { path: '/api/v1/nodes/slow' });
      const order: string[] = [];
      const slow = core.readNode({ name: 'slow' }).then(() => order.push('slow'));
      await until(() => kube.countRequests({ path: '/api/v1/nodes/slow' }) === 1);
      await core.readNode({ name: 'fast' }).then(() => order.push('fast'));
      await slow;
      lift();
      await core.readNode({ name: 'slow' }).then(() => order.push('slow again'));
      expect(order).toEqual(['fast', 'slow', 'slow again']);
    });

    it('runs a second writer before the next matching request', async () => {
      kube.putMachine({ metadata: { name: 'w' } });
      kube.beforeNext({ verb: 'patch', resource: 'machines/status' }, () => {
        kube.patchMachineStatusAsOtherWriter('w', { message: 'from machina' });
      });
      const read = (await custom.getClusterCustomObject({ ...machines, name: 'w' })) as KubeObject;
      const res = await failure(
        custom.patchClusterCustomObjectStatus(
          {
            ...machines,
            name: 'w',
            body: {
              metadata: { resourceVersion: read.metadata.resourceVersion },
              status: { phase: 'Ready' },
            },
          },
          merge,
        ),
      );
      expect(res.code).toBe(409);
      expect(kube.getMachine('w')?.status).toEqual({ message: 'from machina' });
    });
  });
});
