// Why the fake API server (test/support/fake-kube): a watch cut while its version is compacted away, and an undecodable line, at chosen moments.
/**
 * The watcher's side of the reflector (src/watcher/watch-loop.ts) against the fake API server:
 * self-registration, the first read that enqueues a reconcile, re-registration of a deleted
 * Machine, decode errors in metrics and status, and the restart reasons it counts. The
 * reflector's own rules (resume, 410, backoff, Retry-After) are tested in
 * test/unit/kube/reflector.test.ts.
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { PreconditionFailedError } from '../../../src/errors.js';
import { createMachineApi } from '../../../src/kube/machine.js';
import { createMachineWatch } from '../../../src/kube/watch.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { runWatchLoop } from '../../../src/watcher/watch-loop.js';
import { WatcherState } from '../../../src/watcher/watcher-state.js';
import { createTestClock, startFakeKube, type FakeKube } from '../../support/fake-kube.js';
import { silentLogger } from './rpc-stub.js';

const NAME = 'w1';

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 2000 && !(await check()); i += 1) await new Promise((r) => setTimeout(r, 5));
  if (!(await check())) throw new Error(`timed out waiting for ${what}`);
}

describe('runWatchLoop', () => {
  let kube: FakeKube;
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    stop = undefined;
    await kube.close();
  });

  async function start(o: { ensureFailures?: Error[] } = {}) {
    kube = await startFakeKube();
    const clock = createTestClock();
    const kc = kube.kubeConfig();
    const machines = createMachineApi({ custom: kc.makeApiClient(CustomObjectsApi), clock });
    const metrics = createMetrics({ version: 't', collectDefaults: false });
    const state = new WatcherState(NAME, clock);
    const ensureFailures = [...(o.ensureFailures ?? [])];
    let ensures = 0;
    let changes = 0;
    const controller = new AbortController();
    const done = runWatchLoop(
      {
        name: NAME,
        machines,
        machineWatch: createMachineWatch({ kc }),
        ensureMachine: async () => {
          ensures += 1;
          const fail = ensureFailures.shift();
          if (fail) throw fail;
          if (kube.getMachine(NAME) !== undefined) return { created: false };
          kube.putMachine({ metadata: { name: NAME } });
          return { created: true };
        },
        onChange: () => (changes += 1),
        clock,
        backoff: { baseMs: 100, maxMs: 1000, random: () => 1 },
        logger: silentLogger,
        metrics,
        state,
      },
      controller.signal,
    );
    stop = async () => {
      controller.abort();
      await done;
    };
    const counter = async (metric: 'watchRestarts' | 'watchEvents', label: string): Promise<number> =>
      (await metrics[metric].get()).values
        .filter((v) => Object.values(v.labels).includes(label))
        .reduce((n, v) => n + v.value, 0);
    return { clock, metrics, state, counter, ensures: () => ensures, changes: () => changes };
  }

  it('registers the Machine, reads it (a first reconcile), and follows its changes', async () => {
    const h = await start();
    await until('the watch', () => h.state.connected);
    expect(h.ensures()).toBe(1);
    expect(h.changes()).toBe(1);
    kube.putMachine({ metadata: { name: NAME, labels: { a: 'b' } } });
    await until('the change', () => h.changes() === 2);
    expect(await h.counter('watchEvents', 'MODIFIED')).toBe(1);
    expect(h.state.snapshot()).toMatchObject({ connected: true, lastEventAt: expect.any(String) });
    // A stream the server ends after it worked resumes at once, counted as `closed`.
    kube.cutWatches();
    await until('the resumed watch', async () => (await h.counter('watchRestarts', 'closed')) === 1);
    await until('the watch again', () => kube.openWatches === 1);
    expect(h.clock.sleeps).toEqual([]);
    await stop?.();
    expect(h.state.connected).toBe(false);
  });

  // The Machine's own resourceVersion is older than the compaction (only a Node changed since): a
  // watch from it is gone at once. The relist must give a version to watch from that is not.
  it('counts a 410 as `gone`, lists the Machine again and watches from the list’s version', async () => {
    const h = await start();
    await until('the watch', () => kube.openWatches === 1);
    kube.putMachine({ metadata: { name: NAME, labels: { a: 'b' } } });
    await until('the change', () => h.changes() === 2);
    kube.cutWatches({ abrupt: true });
    kube.addNode('n1'); // the history moves on past the watch's version, and is compacted
    kube.compactHistory();
    await until('the relist', async () => (await h.counter('watchRestarts', 'gone')) >= 1);
    // A watch from a version that is gone ends before the fake server counts it open.
    await until('the watch from the new list', () => kube.openWatches === 1);
    expect(await h.counter('watchRestarts', 'gone')).toBe(1);
    expect(h.changes()).toBe(3);
    expect(await h.counter('watchRestarts', 'error')).toBe(1);
  });

  it('registers the node again when its Machine is deleted', async () => {
    const h = await start();
    await until('the watch', () => kube.openWatches === 1);
    kube.deleteMachine(NAME);
    await until('the registration again', () => h.ensures() === 2 && kube.openWatches === 1);
    expect(kube.getMachine(NAME)).toBeDefined();
    expect(h.clock.sleeps).toEqual([]);
  });

  it('counts decode errors instead of swallowing them, and does not reconcile on them', async () => {
    const h = await start();
    await until('the watch', () => kube.openWatches === 1);
    kube.sendWatchLine(
      JSON.stringify({
        type: 'MODIFIED',
        object: {
          metadata: { name: NAME, resourceVersion: '99' },
          spec: { operations: { repaveCounter: -1 } },
        },
      }),
    );
    await until(
      'the decode error',
      async () => ((await h.metrics.watchDecodeErrors.get()).values[0]?.value ?? 0) === 1,
    );
    expect(h.state.snapshot()).toMatchObject({ lastErrorCode: 'KUBE_UNAVAILABLE' });
    expect(h.changes()).toBe(1);
  });

  it('retries self-registration after the backoff until it succeeds, reporting why it failed', async () => {
    const h = await start({
      ensureFailures: [
        new PreconditionFailedError('Machine w1 does not exist and this node has not joined yet'),
      ],
    });
    await until('the watch', () => kube.openWatches === 1);
    expect(h.clock.sleeps).toEqual([100]);
    expect(h.ensures()).toBe(2);
    expect(await h.counter('watchRestarts', 'error')).toBe(1);
  });
});
