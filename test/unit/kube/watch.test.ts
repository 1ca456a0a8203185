import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentError } from '../../../src/errors.js';
import { createMachineWatch, isWatchExpired } from '../../../src/kube/watch.js';
import type { MachineWatchEvent, MachineWatchHandle } from '../../../src/kube/watch.js';
import { startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';

interface Session {
  events: MachineWatchEvent[];
  done: Promise<AgentError | null>;
  doneCalls: () => number;
  handle: MachineWatchHandle;
}

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setImmediate(resolve));
}

describe('watchMachine', () => {
  let kube: FakeKube;
  const handles: MachineWatchHandle[] = [];

  async function watch(
    name: string,
    resourceVersion: string | undefined,
    token?: string,
    group?: string,
  ): Promise<Session> {
    const { watchMachine } = createMachineWatch({ kc: kube.kubeConfig(token), group });
    const events: MachineWatchEvent[] = [];
    let calls = 0;
    let resolve: (err: AgentError | null) => void = () => undefined;
    const done = new Promise<AgentError | null>((r) => (resolve = r));
    const handle = await watchMachine(
      name,
      resourceVersion,
      (e) => events.push(e),
      (err) => {
        calls += 1;
        resolve(err);
      },
    );
    handles.push(handle);
    return { events, done, doneCalls: () => calls, handle };
  }

  beforeEach(async () => {
    kube = await startFakeKube();
  });
  afterEach(async () => {
    for (const h of handles.splice(0)) h.abort();
    await kube.close();
  });

  it('resumes from a resourceVersion, only for the named Machine, with parsed objects', async () => {
    const start = kube.putMachine({ metadata: { name: 'w' } });
    kube.patchMachineSpecAsOtherWriter('w', { operations: { repaveCounter: 1 } });
    const s = await watch('w', start.metadata.resourceVersion);
    await kube.whenWatching(1);
    kube.putMachine({ metadata: { name: 'other' } });
    kube.patchMachineStatusAsOtherWriter('w', { phase: 'Ready' });
    await until(() => s.events.length >= 2);
    expect(s.events).toEqual([
      {
        type: 'MODIFIED',
        machine: expect.objectContaining({
          spec: expect.objectContaining({ operations: { repaveCounter: 1, rebootCounter: 0 } }),
        }),
        resourceVersion: expect.any(String),
      },
      {
        type: 'MODIFIED',
        machine: expect.objectContaining({ status: { phase: 'Ready' } }),
        resourceVersion: kube.resourceVersion,
      },
    ]);
    const request = kube.requests.find((r) => r.verb === 'watch');
    expect(new URLSearchParams(request?.query).get('fieldSelector')).toBe('metadata.name=w');
    expect(new URLSearchParams(request?.query).get('allowWatchBookmarks')).toBe('true');
  });

  it('passes bookmarks on with their resourceVersion', async () => {
    kube.putMachine({ metadata: { name: 'w' } });
    const s = await watch('w', kube.resourceVersion);
    await kube.whenWatching(1);
    kube.putMachine({ metadata: { name: 'other' } });
    kube.sendBookmarks();
    await until(() => s.events.length >= 1);
    expect(s.events).toEqual([{ type: 'BOOKMARK', resourceVersion: kube.resourceVersion }]);
  });

  it('ends with an error isWatchExpired recognises when the resourceVersion was compacted (410)', async () => {
    const m = kube.putMachine({ metadata: { name: 'w' } });
    kube.patchMachineStatusAsOtherWriter('w', { phase: 'Ready' });
    kube.compactHistory();
    const s = await watch('w', m.metadata.resourceVersion);
    const err = await s.done;
    expect(isWatchExpired(err)).toBe(true);
    expect(err).toMatchObject({ code: 'KUBE_UNAVAILABLE', data: { reason: 'Expired', status: 410 } });
    expect(s.events).toEqual([]);
  });

  it('reports a stream the server closed as a clean end (null), once', async () => {
    const s = await watch('w', kube.resourceVersion);
    await kube.whenWatching(1);
    kube.cutWatches();
    expect(await s.done).toBeNull();
    await new Promise((resolve) => setImmediate(resolve));
    expect(s.doneCalls()).toBe(1);
  });

  it('reports an abruptly cut stream as an error that is not an expiry', async () => {
    const s = await watch('w', kube.resourceVersion);
    await kube.whenWatching(1);
    kube.cutWatches({ abrupt: true });
    const err = await s.done;
    // Depending on timing the client sees a reset (error) or an end (null); neither is a 410.
    expect(isWatchExpired(err)).toBe(false);
  });

  it('does not call onDone after abort, and closes the stream', async () => {
    const s = await watch('w', kube.resourceVersion);
    await kube.whenWatching(1);
    s.handle.abort();
    await until(() => kube.openWatches === 0);
    kube.putMachine({ metadata: { name: 'w' } });
    await new Promise((resolve) => setImmediate(resolve));
    expect(s.doneCalls()).toBe(0);
    expect(s.events).toEqual([]);
  });

  it('reports a Machine that does not parse as a DECODE_ERROR event and keeps watching', async () => {
    const s = await watch('w', kube.resourceVersion);
    await kube.whenWatching(1);
    kube.putMachine({ metadata: { name: 'w' }, spec: { agent: { image: 7 } } });
    kube.putMachine({ metadata: { name: 'w' }, spec: { agent: { image: 'ok' } } });
    await until(() => s.events.length >= 2);
    expect(s.events[0]).toMatchObject({ type: 'DECODE_ERROR', error: { code: 'INVALID_CONFIG' } });
    expect(s.events[1]).toMatchObject({ type: 'MODIFIED', machine: { spec: { agent: { image: 'ok' } } } });
  });

  it('reports a missing CRD and rejected credentials through onDone', async () => {
    kube.setCrdInstalled('unbounded-cloud.io', false);
    expect(await (await watch('w', undefined)).done).toMatchObject({ data: { reason: 'CrdMissing' } });
    expect(await (await watch('w', undefined, 'bad-token', 'unbounded-kube.io')).done).toMatchObject({
      data: { reason: 'Unauthorized' },
    });
  });
});
