/**
 * `status` latency while the daemon works: the p99 of `status` polls while the daemon runs
 * updates back to back (each one pulls the image, unpacks it into the target and downloads and
 * hashes the artifacts of a new Kubernetes version), against the p99 of the same polls on the
 * same daemon while it is idle, in the same run. Target: busy p99 ≤ 5 × idle p99
 * (docs/benchmarks.md, "RPC under work"). Needs h2load (Debian: nghttp2-client).
 *
 *   npx tsx bench/rpc-under-work.ts        (after npm run build)
 *   BENCH_SECONDS=10 BENCH_ROUNDS=5 npx tsx bench/rpc-under-work.ts
 *
 * The polls come at a fixed rate (h2load --rps), as monitoring polls, not as fast as the daemon
 * answers: what is measured is how long a poll waits behind the daemon's own work.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { createOciImage } from '../src/sim/mirror/oci-image.js';
import { createRegistryHandler } from '../src/sim/mirror/registry.js';
import { pinServer, runLoad, type LoadResult } from './lib/load.js';
import { median } from './lib/measure.js';
import { makeTempDir, startDaemon, type Child } from './lib/processes.js';
import { RUNTIME_FLAGS } from '../scripts/build.js';
import { renderTable } from './lib/table.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Pollers and the rate of each: 4 × 25 = 100 status calls a second. */
const POLLERS = 4;
const RPS_EACH = 25;
const TARGET = 5;
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'status' });
/** What the image adds to the sim's: files of a rootfs's sizes, some of them incompressible. */
const IMAGE_MIB = Number(process.env.BENCH_IMAGE_MIB ?? 64);

/**
 * A registry serving the sim's image with IMAGE_MIB more in its base layer (many small files and
 * a few large ones, half random bytes), so that each update unpacks and hashes real amounts.
 */
async function startImageRegistry(): Promise<{ hostPort: string; close: () => void }> {
  const extraFiles = [];
  const small = 4096;
  let left = IMAGE_MIB * 1024 * 1024;
  for (let i = 0; left > 0; i++) {
    const size = i % 64 === 0 ? Math.min(left, 4 * 1024 * 1024) : Math.min(left, small);
    const bytes = i % 2 === 0 ? randomBytes(size) : Buffer.alloc(size, `file ${i} of the bench image\n`);
    extraFiles.push({ path: `usr/lib/bench/${Math.floor(i / 256)}/f${i}`, content: bytes });
    left -= size;
  }
  const image = createOciImage({ extraFiles });
  const handler = createRegistryHandler({ image: () => image });
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    handler(req, res, url).then(
      (handled) => {
        if (!handled) res.writeHead(404, { 'content-length': 0 }).end();
      },
      (err: unknown) => res.destroy(err instanceof Error ? err : new Error(String(err))),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    hostPort: `127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** One JSON-RPC call over the socket, with no time limit of its own (an update with wait takes seconds). */
function call(socketPath: string, method: string, params: unknown): Promise<Record<string, unknown>> {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, method: 'POST', path: '/rpc', headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          const answer = JSON.parse(text) as { result?: Record<string, unknown>; error?: unknown };
          if (answer.result === undefined) reject(new Error(`${method}: ${JSON.stringify(answer.error)}`));
          else resolve(answer.result);
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Updates back to back, each to a new Kubernetes version and image tag, until `stop` is set. */
function updateLoop(daemon: Child, registry: string): { stop: () => Promise<number> } {
  let stopping = false;
  let done = 0;
  const loop = (async () => {
    for (let minor = 1; !stopping; minor++) {
      const op = await call(daemon.socket, 'update', {
        set: { kubernetesVersion: `1.34.${minor}`, image: `${registry}/bench/rootfs:v${minor}` },
        wait: true,
        reason: 'bench',
      });
      if (op.state !== 'succeeded') throw new Error(`update to 1.34.${minor}: ${JSON.stringify(op)}`);
      done++;
    }
  })();
  // Reported by `stop`; until then a failed update must not end the process unhandled.
  loop.catch(() => undefined);
  return {
    stop: async () => {
      stopping = true;
      await loop;
      return done;
    },
  };
}

const poll = (daemon: Child): Promise<LoadResult> =>
  runLoad({
    socketPath: daemon.socket,
    path: '/rpc',
    body: BODY,
    connections: POLLERS,
    rps: RPS_EACH,
    durationSeconds: SECONDS,
  });

async function main(): Promise<void> {
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(
    [
      `agentd status under work, ${new Date().toISOString()}`,
      `node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'unknown cpu'}; load average ${load} at start`,
      `${POLLERS} pollers × ${RPS_EACH} status/s; updates with an image of the sim's + ${IMAGE_MIB} MiB; ${ROUNDS} rounds of ${SECONDS} s idle, then ${ROUNDS} while updates run back to back, then ${ROUNDS} idle again`,
    ].join('\n'),
  );
  const tmp = await makeTempDir('agentd-bench-under-work-');
  let daemon: Child | undefined;
  const registry = await startImageRegistry();
  try {
    // --sim: the local mirror serves the artifacts of any version and the image.
    daemon = await startDaemon(tmp.dir, { nodeArgs: [...RUNTIME_FLAGS], args: ['--sim'] });
    pinServer(daemon.pid);
    // Join first (the sim's default config), so that every measured update is a switch-over.
    const join = await call(daemon.socket, 'update', { wait: true, reason: 'bench join' });
    if (join.state !== 'succeeded') throw new Error(`join: ${JSON.stringify(join)}`);
    // Warm-up: the first polls and the first update pay for code loading.
    await runLoad({
      socketPath: daemon.socket,
      path: '/rpc',
      body: BODY,
      connections: 1,
      durationSeconds: 1,
    });

    const idle: LoadResult[] = [];
    for (let i = 0; i < ROUNDS; i++) idle.push(await poll(daemon));
    const updates = updateLoop(daemon, registry.hostPort);
    const busy: LoadResult[] = [];
    for (let i = 0; i < ROUNDS; i++) busy.push(await poll(daemon));
    const updated = await updates.stop();
    for (let i = 0; i < ROUNDS; i++) idle.push(await poll(daemon));

    const row = (name: string, runs: LoadResult[]): (string | number)[] => [
      name,
      median(runs.map((r) => r.rps)),
      median(runs.map((r) => r.p50)),
      median(runs.map((r) => r.p99)),
      runs.map((r) => r.p99.toFixed(2)).join(' '),
      String(runs.reduce((n, r) => n + r.failures, 0)),
    ];
    console.log('\nstatus latency (ms)\n');
    console.log(
      renderTable(
        ['daemon', 'req/s', 'p50 ms', 'p99 ms (median)', 'p99 per round', 'errors'],
        [row('idle', idle), row('updates back to back', busy)],
      ),
    );
    const ratio = median(busy.map((r) => r.p99)) / median(idle.map((r) => r.p99));
    console.log(
      `\n${updated} updates ran while measuring; p99 busy/idle: ${ratio.toFixed(2)} (target ≤ ${TARGET}: ${ratio <= TARGET ? 'met' : 'NOT met'})`,
    );
  } finally {
    await daemon?.stop();
    registry.close();
    await tmp.cleanup();
  }
}

main().catch((err: unknown) => {
  console.error(`bench/rpc-under-work: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
});
