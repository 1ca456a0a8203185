/**
 * Watch latency on the real control plane (test/support/control-plane: etcd, kube-apiserver
 * v1.34.4 built by scripts/control-plane.sh): the time from a Machine spec patch (a repave, sent
 * by an admin client) to the `update` it asks for starting in agentd, against the time until
 * `kubectl get machine -w` (the same release's kubectl) prints the same patch, measured in the
 * same runs. Target (issue 39): median and p99 at most 1.5x kubectl's. Prints a table; asserts
 * nothing.
 *
 * agentd runs as on a node: the built daemon (`node dist/bin/agentd.js`, the simulated host),
 * joined with an agent config naming the control plane and a bootstrap token, so that its
 * watcher takes its credentials, CA, connection pool and rate limit from the applied config, with
 * deploy/rbac.yaml's rights; every repave is a whole update on the simulated host. Two ends are
 * read from the operation the repave made (its `createdAt` and `startedAt`, the engine's clock):
 * the update **admitted** (the engine has read the node, checked its files against the host, and
 * made the operation) and the update **started** (its record and its journal are on disk, fsynced:
 * the first thing it does). kubectl's end is its line's arrival on its stdout pipe. The host's
 * clock times them all (the engine's in milliseconds).
 *
 *   scripts/control-plane.sh && npm run build && npx tsx bench/kube-watch.ts   (BENCH_RUNS=100 for more)
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import pino from 'pino';
import { DEFAULT_KUBE_BURST, DEFAULT_KUBE_QPS } from '../src/kube/rate-limit.js';
import { mirrorDownloads, startMirror } from '../src/sim/mirror/index.js';
import { makeAgentConfig } from '../test/support/agent-config.js';
import { startControlPlane } from '../test/support/control-plane/index.js';
import { median } from './lib/measure.js';
import { makeTempDir, startDaemon } from './lib/processes.js';
import { renderTable } from './lib/table.js';
import { requestUnix } from './lib/unix-http.js';
import { p99 } from './lib/watcher-bench.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const WARMUP = 5;
const NAME = 'bench-node';
/** The rate limit's whole burst accrues again in 2 s (DEFAULT_KUBE_BURST / DEFAULT_KUBE_QPS). */
const IDLE_MS = (DEFAULT_KUBE_BURST / DEFAULT_KUBE_QPS) * 1000;
const MACHINES = '/apis/unbounded-cloud.io/v1alpha3/machines';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

async function main(): Promise<void> {
  const cpus = os.cpus();
  console.log(
    [
      `agentd watch latency on the real control plane, ${new Date().toISOString()}`,
      `node ${process.version}, ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown cpu'}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
      `${RUNS} runs after ${WARMUP} warm-up runs; patch → agentd's update starts vs. patch → kubectl get machine -w prints it`,
    ].join('\n'),
  );

  const cp = await startControlPlane({ controllerManager: false });
  const mirror = await startMirror({ logger: pino({ level: 'silent' }) });
  const tmp = await makeTempDir('agentd-bench-kube-watch-');
  const kubectlSaw = new Map<number, number>();
  const daemonLog: string[] = [];
  let kubectl: ReturnType<typeof spawn> | null = null;
  let daemon: Awaited<ReturnType<typeof startDaemon>> | null = null;
  const admitted: number[] = [];
  const started: number[] = [];
  const roundTrip: number[] = [];
  try {
    await cp.kubelet.addNode(NAME);
    await cp.api.create(MACHINES, {
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
    daemon = await startDaemon(tmp.dir, {
      watch: true,
      args: ['--watch', '--machine-name', NAME],
      onStdoutLine(line) {
        daemonLog.push(line.slice(0, 600));
        if (daemonLog.length > 40) daemonLog.shift();
      },
    });
    const rpc = async <T>(method: string, params: unknown): Promise<T> => {
      const res = await requestUnix(
        daemon!.socket,
        'POST',
        '/rpc',
        JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      );
      const body = JSON.parse(res.body) as { result?: T; error?: unknown };
      if (body.error !== undefined) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
      return body.result as T;
    };
    const config = makeAgentConfig({
      MachineName: NAME,
      OCIImage: `${mirror.hostPort}/agentd/test-rootfs:v1`,
      Downloads: mirrorDownloads(mirror.url),
      Cluster: {
        CaCertBase64: Buffer.from(cp.caPem).toString('base64'),
        ClusterDNS: '10.0.0.10',
        Version: '1.34.0',
      },
      Kubelet: {
        ApiServer: cp.server,
        Auth: { BootstrapToken: cp.bootstrapToken.token },
        Labels: { 'unbounded-cloud.io/site': 'bench' },
        RegisterWithTaints: [],
      },
    });
    const join = await rpc<{ id: string }>('update', { config });
    const status = (): Promise<{
      operation: unknown;
      lastOperation: { id: string; state: string } | null;
      watcher: { connected: boolean; lastReconcileAt: string | null } | null;
    }> => rpc('status', {});
    await until('the join', async () => (await status()).lastOperation?.id === join.id);
    await until('the watcher', async () => {
      const s = await status();
      return s.watcher?.connected === true && s.watcher.lastReconcileAt !== null && s.operation === null;
    });

    // kubectl's watch: one line per event, the spec's counter; the first line with `i` is patch i.
    kubectl = spawn(
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
    let kubectlLines = 0;
    createInterface({ input: kubectl.stdout! }).on('line', (line) => {
      kubectlLines += 1;
      const n = Number(line.trim());
      if (line.trim() !== '' && Number.isInteger(n) && !kubectlSaw.has(n))
        kubectlSaw.set(n, performance.now());
    });
    await until('kubectl to print the Machine', () => kubectlLines > 0);

    const machinePath = `${MACHINES}/${NAME}`;
    for (let i = 1; i <= WARMUP + RUNS; i += 1) {
      // The engine's timestamps are on the wall clock; kubectl's line on the monotonic one.
      const wall0 = Date.now();
      const t0 = performance.now();
      await cp.api.mergePatch(machinePath, { spec: { operations: { repaveCounter: i } } });
      await until(`kubectl to print patch ${i}`, () => kubectlSaw.has(i));
      // The repave runs to its end and the watcher acknowledges it; then the node is idle again.
      await until(`repave ${i} to be acknowledged`, async () => {
        const m = await cp.api.get(machinePath);
        return m.status?.operations?.repaveCounter === i && (await status()).operation === null;
      });
      const { operations } = await rpc<{
        operations: Array<{ idempotencyKey: string | null; createdAt: string; startedAt: string | null }>;
      }>('operations.list', { limit: 5 });
      const op = operations.find((o) => o.idempotencyKey?.endsWith(`/repave-${i}`));
      if (op?.startedAt == null) throw new Error(`no started update for repave ${i}`);
      // The next patch comes to an idle agent, as a Machine change usually does: one whose client-side
      // rate limit (src/kube/rate-limit.ts: bursts of 10, 5 a second) has its burst again, after
      // the requests of the repave it just ran.
      await sleep(IDLE_MS);
      if (i > WARMUP) {
        admitted.push(Date.parse(op.createdAt) - wall0);
        started.push(Date.parse(op.startedAt) - wall0);
        roundTrip.push((kubectlSaw.get(i) ?? Number.NaN) - t0);
      }
    }
  } catch (err) {
    // Printed before the clean-up, which may not finish after a failure.
    console.error(err, `\nagentd's last log lines:\n${daemonLog.join('\n')}`);
    throw err;
  } finally {
    kubectl?.kill();
    await daemon?.stop();
    await mirror.close();
    await cp.stop();
    await tmp.cleanup();
  }

  const row = (label: string, v: number[]): (string | number)[] => [label, median(v), p99(v), Math.min(...v)];
  const ratio = (label: string, v: number[]): (string | number)[] => [
    label,
    median(v) / median(roundTrip),
    p99(v) / p99(roundTrip),
    Math.min(...v) / Math.min(...roundTrip),
  ];
  console.log('\nLatency (ms)\n');
  console.log(
    renderTable(
      ['measure', 'median', 'p99', 'min'],
      [
        row('Machine patch → kubectl get -w prints it', roundTrip),
        row('Machine patch → agentd admits the update', admitted),
        row('Machine patch → the update starts', started),
        ratio('ratio admitted / kubectl', admitted),
        ratio('ratio started / kubectl', started),
      ],
    ),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
