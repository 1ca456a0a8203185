// Why the fake API server (test/support/fake-kube): no fault: requests counted at the server while the limit runs on the injected clock.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createKubeClients } from '../../../src/kube/client.js';
import type { KubeClients } from '../../../src/kube/client.js';
import { createMachineWatch } from '../../../src/kube/watch.js';
import { watchStream } from '../../../src/kube/watch-stream.js';
import { createRateLimiter } from '../../../src/kube/rate-limit.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';

describe('createRateLimiter', () => {
  it('lets a burst of 10 through at once, then 5 a second', async () => {
    const clock = createTestClock();
    const limiter = createRateLimiter({ clock });
    for (let i = 0; i < 10; i += 1) await limiter.acquire();
    expect(clock.sleeps).toEqual([]);
    await limiter.acquire();
    await limiter.acquire();
    expect(clock.sleeps).toEqual([200, 200]);
  });

  it('refills while quiet, never above the burst', async () => {
    const clock = createTestClock();
    const limiter = createRateLimiter({ clock, qps: 5, burst: 10 });
    for (let i = 0; i < 10; i += 1) await limiter.acquire();
    clock.advance(1000); // five tokens back
    for (let i = 0; i < 5; i += 1) await limiter.acquire();
    expect(clock.sleeps).toEqual([]);
    await limiter.acquire();
    expect(clock.sleeps).toEqual([200]);
    clock.advance(60_000);
    for (let i = 0; i < 10; i += 1) await limiter.acquire();
    await limiter.acquire();
    expect(clock.sleeps).toEqual([200, 200]);
  });

  it('gives the reservation back when the wait is aborted', async () => {
    const clock = createTestClock();
    const limiter = createRateLimiter({ clock, qps: 1, burst: 1 });
    await limiter.acquire();
    const controller = new AbortController();
    controller.abort();
    await expect(limiter.acquire(controller.signal)).rejects.toThrow();
    await limiter.acquire();
    expect(clock.sleeps).toEqual([1000]);
  });

  it('rejects a bad configuration, naming it', () => {
    expect(() => createRateLimiter({ qps: 0 })).toThrow(/qps > 0/);
    expect(() => createRateLimiter({ burst: 0.5 })).toThrow(/burst/);
  });
});

describe('createKubeClients: every request passes the rate limit', () => {
  let kube: FakeKube | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await kube?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('API calls and watches alike wait their turn', async () => {
    kube = await startFakeKube();
    kube.putMachine({ metadata: { name: 'w' } });
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-rate-'));
    const kubeconfigPath = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfigPath, kube.kubeconfigYaml());
    const clock = createTestClock();
    const clients = createKubeClients({
      kubeconfigPath,
      crdGroup: 'unbounded-cloud.io',
      inCluster: false,
      rateLimit: { clock },
    }) as KubeClients;
    const get = () =>
      clients.custom.getClusterCustomObject({
        group: 'unbounded-cloud.io',
        version: 'v1alpha3',
        plural: 'machines',
        name: 'w',
      });
    for (let i = 0; i < 10; i += 1) await get();
    expect(clock.sleeps).toEqual([]);
    await get();
    await clients.core.listNode();
    // A watch, as the reflector sends it: stopped once the server answered.
    const watching = new AbortController();
    await watchStream(clients.kc, clients.transport, {
      ...createMachineWatch({ kc: clients.kc }).target('w'),
      signal: watching.signal,
      onOpen: () => watching.abort(),
      onEvent: () => undefined,
      onUndecodable: () => undefined,
    });
    expect(clock.sleeps).toEqual([200, 200, 200]);
    expect(kube.countRequests()).toBe(13);
  });
});
