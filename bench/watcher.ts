/**
 * Watcher benchmark: the latency from a Machine spec patch landing in the fake API server
 * (`test/support/fake-kube`) to the `update` call starting in agentd, against the fake server's
 * own round-trip time (a GET of the same Machine through the same client) measured in the same
 * run, interleaved. Prints a table; asserts nothing (the numbers go in docs/benchmarks.md).
 *
 * Everything runs in this process, so both ends are timed on one clock: the real watcher (watch
 * loop, work queue, reconciler), the real Machine client and watch over HTTP to the fake server,
 * and the real JSON-RPC dispatcher and method table through the in-process transport. Only the
 * engine behind the dispatcher is a stand-in, which records when `update` is called and answers
 * at once.
 *
 *   npx tsx bench/watcher.ts            (BENCH_RUNS=200 for more samples)
 */
import os from 'node:os';
import { CustomObjectsApi } from '@kubernetes/client-node';
import pino from 'pino';
import { StatusVersion } from '../src/engine/status-version.js';
import { createMachineApi } from '../src/kube/machine.js';
import { createMachineWatch } from '../src/kube/watch.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { createRpcClient } from '../src/rpc/client.js';
import { createDispatcher } from '../src/rpc/dispatcher.js';
import { createInProcessTransport } from '../src/rpc/in-process-transport.js';
import { METHOD_LIST } from '../src/rpc/methods/index.js';
import { createMachineWatcher } from '../src/watcher/index.js';
import { startFakeKube } from '../test/support/fake-kube.js';
import { median } from './lib/measure.js';
import { renderTable } from './lib/table.js';
import { benchPorts, p99, waitFor } from './lib/watcher-bench.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 50);
const WARMUP = 5;
const NAME = 'bench-node';

async function main(): Promise<void> {
  const cpus = os.cpus();
  console.log(
    [
      `agentd watcher benchmark, ${new Date().toISOString()}`,
      `node ${process.version}, ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown cpu'}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
      `${RUNS} runs after ${WARMUP} warm-up runs; patch → update start vs. a GET round trip to the same fake server`,
    ].join('\n'),
  );

  const kube = await startFakeKube();
  const logger = pino({ level: 'silent' });
  const metrics = createMetrics({ version: 'bench', collectDefaults: false });
  let updateStartedAt: number | null = null;
  const dispatcher = createDispatcher({
    methods: METHOD_LIST,
    services: {
      ...benchPorts(() => (updateStartedAt ??= performance.now())),
      daemonInfo: () => ({ version: 'bench', pid: process.pid, startedAt: '', state: 'ready' }),
      watcherStatus: () => null,
      statusVersion: new StatusVersion(),
      openrpc: () => ({}),
    },
    metrics,
    logger,
    isDraining: () => false,
    isReady: () => true,
  });
  kube.putMachine({
    metadata: { name: NAME },
    spec: { kubernetes: { version: 'v1.34.0', bootstrapTokenRef: { name: 'bootstrap-token-bench' } } },
  });
  const kc = kube.kubeConfig();
  const custom = kc.makeApiClient(CustomObjectsApi);
  const watcher = createMachineWatcher({
    machineName: NAME,
    machines: createMachineApi({ custom }),
    machineWatch: createMachineWatch({ kc }),
    rpc: createRpcClient(createInProcessTransport(dispatcher, 'watcher')),
    registrationConfig: () => null,
    logger,
    metrics,
  });
  watcher.start();

  const latency: number[] = [];
  const roundTrip: number[] = [];
  try {
    await waitFor('the watch', () => watcher.status().connected && watcher.status().lastReconcileAt !== null);
    for (let i = 1; i <= WARMUP + RUNS; i += 1) {
      // The baseline: one request/response with the fake server through the same client.
      const g0 = performance.now();
      await custom.getClusterCustomObject({
        group: 'unbounded-cloud.io',
        version: 'v1alpha3',
        plural: 'machines',
        name: NAME,
      });
      const rtt = performance.now() - g0;

      updateStartedAt = null;
      const t0 = performance.now();
      kube.patchMachineSpecAsOtherWriter(NAME, { operations: { repaveCounter: i } });
      await waitFor(`update ${i}`, () => updateStartedAt !== null);
      const took = (updateStartedAt ?? Number.NaN) - t0;
      // Let the watcher write its status and go idle before the next run.
      await waitFor(`acknowledgement ${i}`, () => {
        const ops = kube.getMachine(NAME)?.status?.operations as { repaveCounter?: number } | undefined;
        return ops?.repaveCounter === i;
      });
      await new Promise((r) => setTimeout(r, 20));
      if (i > WARMUP) {
        latency.push(took);
        roundTrip.push(rtt);
      }
    }
  } finally {
    await watcher.stop();
    await kube.close();
  }

  const row = (label: string, v: number[]): (string | number)[] => [label, median(v), p99(v), Math.min(...v)];
  console.log('\nLatency (ms)\n');
  console.log(
    renderTable(
      ['measure', 'median', 'p99', 'min'],
      [
        row('Machine patch → update call starts', latency),
        row('fake API server round trip (GET)', roundTrip),
        [
          'ratio',
          median(latency) / median(roundTrip),
          p99(latency) / p99(roundTrip),
          Math.min(...latency) / Math.min(...roundTrip),
        ],
      ],
    ),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
