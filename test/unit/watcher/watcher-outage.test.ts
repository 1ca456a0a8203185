// Why the fake API server (test/support/fake-kube): every request failing with 500 or 503 for 30 s of the injected clock.
/**
 * The whole watcher against an API server that fails every request for 30 s (on the injected
 * clock), through the production clients (rate limit included): the backoff must keep the
 * request count low — a constant 0.4 s retry would send ~75 — and the watcher must recover.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import { createKubeClients } from '../../../src/kube/client.js';
import type { KubeClients } from '../../../src/kube/client.js';
import { createMachineApi } from '../../../src/kube/machine.js';
import { createMachineWatch } from '../../../src/kube/watch.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { createMachineWatcher } from '../../../src/watcher/watcher.js';
import type { MachineWatcher } from '../../../src/watcher/watcher.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createTestClock, startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';
import { createStubApi, silentLogger } from './rpc-stub.js';

const NAME = 'worker-01';

describe('the watcher during an API server outage', () => {
  let kube: FakeKube | undefined;
  let watcher: MachineWatcher | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await watcher?.stop();
    await kube?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const cases = [
    { status: 500, what: 'every request', watchesOnly: false },
    // The case that stormed before: reads work, every watch request is answered 500.
    { status: 500, what: 'every watch request', watchesOnly: true },
    { status: 503, what: 'every request', watchesOnly: false },
  ];
  for (const { status, what, watchesOnly } of cases) {
    it(`sends a handful of requests while ${what} fails with ${status} for 30 s, then watches again`, async () => {
      const k = await startFakeKube();
      kube = k;
      dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-outage-'));
      const kubeconfigPath = path.join(dir, 'kubeconfig');
      await writeFile(kubeconfigPath, k.kubeconfigYaml());
      const clock = createTestClock();
      const clients = createKubeClients({
        kubeconfigPath,
        crdGroup: 'unbounded-cloud.io',
        inCluster: false,
        rateLimit: { clock },
      }) as KubeClients;
      const outageEnds = clock.now() + 30_000;
      let failed = 0;
      k.failNext(Number.MAX_SAFE_INTEGER, {
        status,
        match: (request) => {
          if (clock.now() >= outageEnds || (watchesOnly && request.verb !== 'watch')) return false;
          failed += 1;
          return true;
        },
      });
      const w = createMachineWatcher({
        machineName: NAME,
        machines: createMachineApi({ custom: clients.custom, clock }),
        machineWatch: createMachineWatch({ kc: clients.kc, transport: clients.transport }),
        rpc: createStubApi().client,
        registrationConfig: () => agentConfigSchema.parse(makeAgentConfig({ MachineName: NAME })),
        logger: silentLogger,
        metrics: createMetrics({ version: 't', collectDefaults: false }),
        clock, // the production backoff (0.5 s doubling to 30 s, jittered) on the test clock
      });
      watcher = w;
      w.start();
      for (let i = 0; i < 100_000 && !w.status().connected; i += 1) await new Promise((r) => setImmediate(r));
      expect(k.openWatches).toBe(1);
      expect(clock.now()).toBeGreaterThanOrEqual(outageEnds);
      // Tries at 0 and after waits of 0.25–0.5, 0.75–1, 1–2, 2–4, 4–8, 8–16 s: 6 or 7 in 30 s.
      expect(failed).toBeGreaterThanOrEqual(5);
      expect(failed).toBeLessThanOrEqual(7);
    });
  }
});
