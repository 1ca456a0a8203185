/**
 * RPC benchmark: the daemon's `status` call, through its fastify route (src/server/rpc-route.ts),
 * against a bare node:http server that answers the same JSON body, both on unix sockets in child
 * processes, driven by h2load at concurrency 1 and 64 (bench/lib/load.ts: the generator on the
 * first CPU, the servers on the last). Target: at concurrency 64, at least 0.6 × the bare
 * server's requests per second (a floor, not a race: docs/benchmarks.md, "RPC"). Prints tables
 * and whether the target is met; needs h2load (Debian: nghttp2-client).
 *
 *   npx tsx bench/rpc.ts                       (after npm run build; `npm run bench` does both)
 *   BENCH_SECONDS=5 npx tsx bench/rpc.ts       (longer runs)
 *   BENCH_CPU_PROF=prof npx tsx bench/rpc.ts   (CPU profile of the daemon into ./prof)
 *   BENCH_RELEASE=1 npx tsx bench/rpc.ts       (the release executable, after `npm run release`,
 *                                               against a bare server on its own runtime)
 *
 * The daemon runs with the V8 flags the release executable ships with (RUNTIME_FLAGS), as
 * bench/footprint.ts does: what is measured is what runs on a host. BENCH_NODE_ARGS (space
 * separated) replaces them, e.g. BENCH_NODE_ARGS= for Node's defaults.
 */
import os from 'node:os';
import path from 'node:path';
import { cpuPlan, pinServer, runLoad, type LoadResult } from './lib/load.js';
import { cpuTimeMs, median } from './lib/measure.js';
import { makeTempDir, startBaseline, startDaemon, type Child } from './lib/processes.js';
import { RUNTIME_FLAGS } from '../scripts/build.js';
import { unpackRelease } from './lib/release.js';
import { renderTable } from './lib/table.js';
import { requestUnix } from './lib/unix-http.js';

/**
 * Seconds per measured run; each target gets ROUNDS runs per concurrency. With h2load on a core
 * of its own, single rounds at concurrency 64 scatter by about ±0.05 around their median (±0.15
 * with the Node load generator this bench used before, which shared the cores with the server);
 * the median of 15 rounds is what is reported (docs/benchmarks.md, "RPC").
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 1.5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const CONCURRENCY = [1, 64] as const;
const TARGET_RATIO = 0.6;
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'status' });
/** Measure the release executable (what ships) instead of `node dist/bin/agentd.js`. */
const RELEASE = process.env.BENCH_RELEASE === '1';
const NODE_ARGS =
  process.env.BENCH_NODE_ARGS !== undefined
    ? process.env.BENCH_NODE_ARGS.split(' ').filter(Boolean)
    : [...RUNTIME_FLAGS];

interface Measured extends LoadResult {
  /** CPU the server process used per answered request, user + system, in microseconds. */
  cpuUs: number;
  /** The system (kernel) part of it: mostly the socket reads and writes. */
  sysUs: number;
}

function header(): string {
  const cpus = os.cpus();
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  return [
    `agentd RPC benchmark, ${new Date().toISOString()}`,
    `node ${process.version}, ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown cpu'}, ${os.platform()} ${os.release()}`,
    // Other work on the machine skews every number: say how busy it was.
    `load average ${load} at start`,
    `per concurrency: ${ROUNDS} rounds, each one ${SECONDS} s run of both targets back to back (order alternating), after a 1 s warm-up;`,
    'the table shows medians over the rounds, the ratios are medians of the per-round ratios',
    `POST /rpc ${BODY}; agentd at its default log level (info), node ${NODE_ARGS.join(' ') || '(no flags)'}`,
    pinning(),
  ].join('\n');
}

function pinning(): string {
  const plan = cpuPlan();
  return plan
    ? `load generator h2load on CPU ${plan.generator}, each server on CPU ${plan.server} (one at a time)`
    : 'one CPU: load generator and server share it (ratios then understate the server)';
}

/** One measured run against one target (warm-up excluded). */
async function measure(target: Child, connections: number): Promise<Measured> {
  const before = await cpuTimeMs(target.pid);
  const result = await runLoad({
    socketPath: target.socket,
    path: '/rpc',
    body: BODY,
    connections,
    durationSeconds: SECONDS,
  });
  const after = await cpuTimeMs(target.pid);
  const perRequest = (ms: number): number => (ms * 1000) / Math.max(1, result.requests);
  return {
    ...result,
    cpuUs: perRequest(after.user - before.user + after.system - before.system),
    sysUs: perRequest(after.system - before.system),
  };
}

/** The first and third quartile (nearest rank) of `values`. */
function quartiles(values: readonly number[]): [number, number] {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return [at(0.25), at(0.75)];
}

/** Field by field median of several runs. */
function medianRun(runs: readonly Measured[]): Measured {
  const m = (pick: (r: Measured) => number): number => median(runs.map(pick));
  return {
    rps: m((r) => r.rps),
    p50: m((r) => r.p50),
    p99: m((r) => r.p99),
    cpuUs: m((r) => r.cpuUs),
    sysUs: m((r) => r.sysUs),
    failures: runs.reduce((sum, r) => sum + r.failures, 0),
    requests: runs.reduce((sum, r) => sum + r.requests, 0),
  };
}

/** Per-round ratios agentd/baseline, reduced to their median. */
interface Ratios {
  rps: number;
  p50: number;
  p99: number;
  cpuUs: number;
  sysUs: number;
  /** The smallest and largest per-round req/s ratio: how much the machine moved under us. */
  rpsRange: [number, number];
  /** The first and third quartile of the per-round req/s ratios: where half of the rounds fell. */
  rpsQuartiles: [number, number];
}

/**
 * Daemon and baseline in paired rounds: each round runs both back to back, in alternating
 * order, and yields one ratio. This machine's speed drifts by tens of percent over a minute
 * (shared cores); a ratio of two runs seconds apart cancels the drift, and the median of the
 * rounds' ratios drops a round hit by a burst of other work.
 */
async function compare(daemon: Child, baseline: Child, connections: number) {
  for (const target of [daemon, baseline]) {
    // A short warm-up so that JIT and connection setup do not count.
    await runLoad({ socketPath: target.socket, path: '/rpc', body: BODY, connections, durationSeconds: 1 });
  }
  const d: Measured[] = [];
  const b: Measured[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) {
      d.push(await measure(daemon, connections));
      b.push(await measure(baseline, connections));
    } else {
      b.push(await measure(baseline, connections));
      d.push(await measure(daemon, connections));
    }
  }
  const ratio = (pick: (r: Measured) => number): number => median(d.map((r, i) => pick(r) / pick(b[i]!)));
  const rpsRatios = d.map((r, i) => r.rps / b[i]!.rps);
  const ratios: Ratios = {
    rps: ratio((r) => r.rps),
    p50: ratio((r) => r.p50),
    p99: ratio((r) => r.p99),
    cpuUs: ratio((r) => r.cpuUs),
    sysUs: ratio((r) => r.sysUs),
    rpsRange: [Math.min(...rpsRatios), Math.max(...rpsRatios)],
    rpsQuartiles: quartiles(rpsRatios),
  };
  return { d: medianRun(d), b: medianRun(b), ratios };
}

function loadRows(c: number, d: Measured, b: Measured, r: Ratios): (string | number)[][] {
  return [
    ['agentd status', String(c), d.rps, d.p50, d.p99, d.cpuUs, d.sysUs, String(d.failures)],
    ['node:http baseline', String(c), b.rps, b.p50, b.p99, b.cpuUs, b.sysUs, String(b.failures)],
    ['ratio agentd/baseline', String(c), r.rps, r.p50, r.p99, r.cpuUs, r.sysUs, ''],
  ];
}

async function main(): Promise<void> {
  console.log(header());
  const tmp = await makeTempDir('agentd-bench-rpc-');
  const children: Child[] = [];
  try {
    const profDir = process.env.BENCH_CPU_PROF;
    // The release executable takes no V8 flags from outside (its execArgv is fixed at build).
    if (RELEASE && (profDir || process.env.BENCH_NODE_ARGS !== undefined)) {
      throw new Error(
        'BENCH_CPU_PROF and BENCH_NODE_ARGS apply to the npm path only, not with BENCH_RELEASE=1',
      );
    }
    const release = RELEASE ? await unpackRelease(tmp.dir) : undefined;
    if (release === null)
      throw new Error('BENCH_RELEASE=1: no release tarball or runtime; run `npm run release` first');
    if (release) console.log(`release executable ${release.agentd}, runtime Node ${release.nodeVersion}`);
    const daemon = await startDaemon(tmp.dir, {
      executable: release?.agentd,
      nodeArgs: [...NODE_ARGS, ...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profDir)}`] : [])],
    });
    children.push(daemon);
    pinServer(daemon.pid);

    const statusAnswer = await requestUnix(daemon.socket, 'POST', '/rpc', BODY);
    if (statusAnswer.status !== 200 || !statusAnswer.body.includes('"result"')) {
      throw new Error(`status answered HTTP ${statusAnswer.status}: ${statusAnswer.body.slice(0, 300)}`);
    }
    const baseline = await startBaseline(tmp.dir, statusAnswer.body, release ? { node: release.node } : {});
    children.push(baseline);
    pinServer(baseline.pid);

    const rows: (string | number)[][] = [];
    const ratios = new Map<number, Ratios>();
    for (const c of CONCURRENCY) {
      const { d, b, ratios: r } = await compare(daemon, baseline, c);
      ratios.set(c, r);
      rows.push(...loadRows(c, d, b, r));
    }
    console.log('\nThroughput, latency (ms) and server CPU per request (µs)\n');
    console.log(
      renderTable(
        ['target', 'concurrency', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'sys µs/req', 'errors'],
        rows,
      ),
    );
    const r64 = ratios.get(64)!;
    const at64 = r64.rps;
    const cpu64 = r64.cpuUs;
    console.log(
      [
        `\nratio agentd/baseline req/s at concurrency 64: ${at64.toFixed(2)} (target ≥ ${TARGET_RATIO}: ${at64 >= TARGET_RATIO ? 'met' : 'NOT met'})`,
        `  per-round ratios ranged ${r64.rpsRange.map((x) => x.toFixed(2)).join(' … ')} over ${ROUNDS} rounds, half of them ${r64.rpsQuartiles.map((x) => x.toFixed(2)).join(' … ')}`,
        // The request rate depends on how much CPU the machine leaves each server; CPU per request does not.
        `CPU per request, baseline/agentd, at concurrency 64: ${(1 / cpu64).toFixed(2)} (the req/s ratio when server CPU is the only limit; robust to machine load)`,
      ].join('\n'),
    );
  } finally {
    for (const child of children.reverse()) await child.stop();
    await tmp.cleanup();
  }
}

main().catch((err: unknown) => {
  console.error(`bench/rpc: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
});
