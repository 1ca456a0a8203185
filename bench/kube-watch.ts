/**
 * Watch latency on the real control plane (test/support/control-plane: etcd, kube-apiserver
 * v1.34.4 built by scripts/control-plane.sh): the time from a Machine spec patch (sent by an
 * admin client) to the `update` call starting in agentd's watcher, against the time until
 * `kubectl get machine -w` (the same release's kubectl) prints the same patch, measured in the
 * same runs. Target (issue 39): median and p99 at most 1.5x kubectl's. Prints a table; asserts
 * nothing.
 *
 * The watcher runs in this process as in bench/watcher.ts (the real watch loop, work queue,
 * reconciler, Machine client and watch over HTTPS to kube-apiserver with a bootstrap token and
 * deploy/rbac.yaml's rights, the real dispatcher); only the engine behind the dispatcher is a
 * stand-in that records when `update` is called. Both ends are timed on this process's clock:
 * kubectl's line is timed when it arrives on its stdout pipe.
 *
 *   scripts/control-plane.sh && npx tsx bench/kube-watch.ts      (BENCH_RUNS=100 for more samples)
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
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { KubeConfig } from '@kubernetes/client-node';
import { startControlPlane } from '../test/support/control-plane/index.js';
import { median } from './lib/measure.js';
import { renderTable } from './lib/table.js';
import { benchPorts, p99, waitFor } from './lib/watcher-bench.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const WARMUP = 5;
const NAME = 'bench-node';

async function main(): Promise<void> {
  const cpus = os.cpus();
  console.log(
    [
      `agentd watcher benchmark on the real control plane, ${new Date().toISOString()}`,
      `node ${process.version}, ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown cpu'}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
      `${RUNS} runs after ${WARMUP} warm-up runs; patch → update start vs. patch → kubectl get machine -w prints it`,
    ].join('\n'),
  );

  const cp = await startControlPlane({ controllerManager: false });
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
  const machinePath = `/apis/unbounded-cloud.io/v1alpha3/machines/${NAME}`;
  await cp.api.create('/apis/unbounded-cloud.io/v1alpha3/machines', {
    apiVersion: 'unbounded-cloud.io/v1alpha3',
    kind: 'Machine',
    metadata: { name: NAME },
    spec: {
      kubernetes: {
        version: 'v1.34.0',
        bootstrapTokenRef: { name: `bootstrap-token-${cp.bootstrapToken.id}` },
      },
    },
  });
  const kc = new KubeConfig();
  kc.loadFromString(cp.tokenKubeconfig(cp.bootstrapToken.token));
  // kubectl's watch: one line per event, the spec's counter; the first line with `i` is patch i.
  const kubectlSaw = new Map<number, number>();
  const kubectl = spawn(
    path.join(cp.bin, 'kubectl'),
    [
      `--kubeconfig=${cp.adminKubeconfig}`,
      'get',
      'machine',
      NAME,
      '-w',
      '-o',
      'jsonpath={.spec.operations.repaveCounter}{"\\n"}',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  createInterface({ input: kubectl.stdout }).on('line', (line) => {
    const n = Number(line.trim());
    if (Number.isInteger(n) && !kubectlSaw.has(n)) kubectlSaw.set(n, performance.now());
  });
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
      updateStartedAt = null;
      const t0 = performance.now();
      await cp.api.mergePatch(machinePath, { spec: { operations: { repaveCounter: i } } });
      await waitFor(`update ${i}`, () => updateStartedAt !== null && kubectlSaw.has(i));
      const took = (updateStartedAt ?? Number.NaN) - t0;
      const kubectlTook = (kubectlSaw.get(i) ?? Number.NaN) - t0;
      // Let the watcher write its status and go idle before the next run.
      for (;;) {
        const m = await cp.api.get(machinePath);
        if (m.status?.operations?.repaveCounter === i) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await new Promise((r) => setTimeout(r, 50));
      if (i > WARMUP) {
        latency.push(took);
        roundTrip.push(kubectlTook);
      }
    }
  } finally {
    await watcher.stop();
    kubectl.kill();
    await cp.stop();
  }

  const row = (label: string, v: number[]): (string | number)[] => [label, median(v), p99(v), Math.min(...v)];
  console.log('\nLatency (ms)\n');
  console.log(
    renderTable(
      ['measure', 'median', 'p99', 'min'],
      [
        row('Machine patch → update call starts', latency),
        row('Machine patch → kubectl get -w prints it', roundTrip),
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
