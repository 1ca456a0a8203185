// Why the fake API server (test/support/fake-kube): every watch request answered 500, from a chosen moment.
/**
 * The watch loop against a failing API server, over real HTTP with the reflector's own watch request:
 * a watch request answered 500 (or a refused connection) must back off, growing and capped,
 * and report the API error — not restart at a constant pace.
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createMachineApi } from '../../../src/kube/machine.js';
import { createMachineWatch } from '../../../src/kube/watch.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { runWatchLoop } from '../../../src/watcher/watch-loop.js';
import { WatcherState } from '../../../src/watcher/watcher-state.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube, RequestInfo } from '../../support/fake-kube.js';
import { silentLogger } from './rpc-stub.js';

const NAME = 'w1';
const isWatch = (r: RequestInfo): boolean => r.verb === 'watch';

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 100_000 && !check(); i += 1) await new Promise((r) => setImmediate(r));
  expect(check()).toBe(true);
}

describe('runWatchLoop against a failing API server', () => {
  let kube: FakeKube | undefined;
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    await kube?.close();
    stop = undefined;
    kube = undefined;
  });

  async function start(): Promise<{
    clock: ReturnType<typeof createTestClock>;
    state: WatcherState;
    kube: FakeKube;
    metrics: ReturnType<typeof createMetrics>;
  }> {
    const k = await startFakeKube();
    kube = k;
    k.putMachine({ metadata: { name: NAME } });
    const clock = createTestClock();
    const state = new WatcherState(NAME, clock);
    const kc = k.kubeConfig();
    const controller = new AbortController();
    const metrics = createMetrics({ version: 't', collectDefaults: false });
    const done = runWatchLoop(
      {
        name: NAME,
        machines: createMachineApi({ custom: kc.makeApiClient(CustomObjectsApi), clock }),
        machineWatch: createMachineWatch({ kc }),
        ensureMachine: async () => ({ created: false }),
        onChange: () => undefined,
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
    return { clock, state, kube: k, metrics };
  }

  it('backs off (growing, capped) while watch requests answer 500, and reports the API error', async () => {
    const { clock, state, kube: k } = await start();
    k.failNext(1000, { status: 500, match: isWatch });
    await until(() => clock.sleeps.length >= 6);
    expect(clock.sleeps.slice(0, 6)).toEqual([100, 200, 400, 800, 1000, 1000]);
    const snap = state.snapshot();
    expect(snap.lastErrorCode).toBe('KUBE_UNAVAILABLE');
    expect(snap.lastError).toMatch(/500|Internal Server Error/);
    expect(snap.lastError).not.toMatch(/is not a function/);
    expect(snap.connected).toBe(false);
  });

  it('resets the backoff only once a watch is established (an event or bookmark arrived)', async () => {
    const { clock, kube: k, metrics } = await start();
    k.failNext(3, { status: 500, match: isWatch });
    await until(() => clock.sleeps.length === 3 && k.openWatches === 1);
    expect(clock.sleeps).toEqual([100, 200, 400]);
    // Opened, but nothing received yet: a cut now is still part of the same failure streak.
    k.cutWatches({ abrupt: true });
    await until(() => clock.sleeps.length === 4 && k.openWatches === 1);
    expect(clock.sleeps[3]).toBe(800);
    // A bookmark proves the watch works: the next failure starts the backoff from the beginning.
    // Seen by the loop (it counts it), however long a loaded machine takes to deliver it.
    const bookmarks = async (): Promise<number> =>
      (await metrics.watchEvents.get()).values.find((v) => v.labels.type === 'BOOKMARK')?.value ?? 0;
    k.sendBookmarks();
    for (let i = 0; i < 2000 && (await bookmarks()) < 1; i += 1) await new Promise((r) => setTimeout(r, 5));
    expect(await bookmarks()).toBe(1);
    k.failNext(1, { status: 500, match: isWatch });
    k.cutWatches({ abrupt: true });
    await until(() => clock.sleeps.length === 6 && k.openWatches === 1);
    expect(clock.sleeps.slice(4)).toEqual([100, 200]);
  });
});
