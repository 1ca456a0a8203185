/**
 * Kubernetes connections benchmark: what a request to the API server costs with agentd's
 * connection pool (src/kube/connection-pool.ts) against client-node alone, which opens a new
 * connection, with a full TLS handshake, for every request. Both clients read the same Node from
 * the same HTTPS server (a certificate of a test CA, ECDSA P-256, as kubeadm's API servers use),
 * in rounds that alternate, in this process: the CPU counted is the client's and the server's
 * together, so it shows what a handshake costs both ends. Prints a table and the ratios;
 * asserts nothing (the numbers go in docs/benchmarks.md).
 *
 *   npx tsx bench/kube-connections.ts      (BENCH_REQUESTS=200 BENCH_ROUNDS=5)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { BARE_TRANSPORT, createAgentPool, makeApiClient } from '../src/kube/connection-pool.js';
import { makeTestCa } from '../test/support/test-ca.js';
import { median } from './lib/measure.js';
import { renderTable } from './lib/table.js';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const NODE = JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'w1' } });

interface Round {
  wallMs: number;
  cpuMs: number;
  handshakes: number;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-kube-'));
  const ca = await makeTestCa(dir);
  let handshakes = 0;
  const server = https.createServer({ key: ca.key, cert: ca.cert }, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(NODE);
  });
  server.on('secureConnection', () => (handshakes += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
  const client = (pooled: boolean): CoreV1Api => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'bench', server: url, caFile: ca.caFile }],
      users: [{ name: 'bench', token: 'bench-token' }],
      contexts: [{ name: 'bench', cluster: 'bench', user: 'bench' }],
      currentContext: 'bench',
    });
    return makeApiClient(kc, pooled ? { limiter: null, pool: createAgentPool() } : BARE_TRANSPORT, CoreV1Api);
  };
  const round = async (pooled: boolean): Promise<Round> => {
    const core = client(pooled);
    handshakes = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < REQUESTS; i++) await core.readNode({ name: 'w1' });
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    return { wallMs: wallMs / REQUESTS, cpuMs: (cpu.user + cpu.system) / 1000 / REQUESTS, handshakes };
  };
  try {
    await round(true); // warm-up: both paths' code compiled
    await round(false);
    const alone: Round[] = [];
    const pooled: Round[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Alternate which goes first, so drift in the machine's speed falls on both.
      if (r % 2 === 0) {
        alone.push(await round(false));
        pooled.push(await round(true));
      } else {
        pooled.push(await round(true));
        alone.push(await round(false));
      }
    }
    const row = (label: string, rs: Round[]): (string | number)[] => [
      label,
      median(rs.map((x) => x.wallMs)),
      median(rs.map((x) => x.cpuMs)),
      median(rs.map((x) => x.handshakes)),
    ];
    console.log(
      `Kubernetes requests over TLS, ${REQUESTS} per round, ${ROUNDS} rounds, ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'cpu'}, Node ${process.version}`,
    );
    console.log(
      `\n${renderTable(
        [
          'client',
          'wall ms per request (median)',
          'CPU ms per request, both ends',
          'TLS handshakes per round',
        ],
        [
          row('client-node alone (a connection per request)', alone),
          row('agentd (src/kube/connection-pool.ts)', pooled),
        ],
      )}`,
    );
    const ratio = (f: (x: Round) => number): string =>
      (median(pooled.map(f)) / median(alone.map(f))).toFixed(2);
    console.log(
      `\nratio agentd / client-node alone: wall ${ratio((x) => x.wallMs)}, CPU ${ratio((x) => x.cpuMs)}`,
    );
  } finally {
    server.closeAllConnections();
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
