/**
 * RPC benchmark: the daemon's `status` call against a bare node:http server that answers the
 * same JSON body, both on unix sockets in child processes, driven by autocannon at concurrency
 * 1 and 64. Also the daemon's idle RSS and `agentctl status --json` wall time against
 * `node -e 0`. Prints tables; asserts nothing (the numbers go in docs/benchmarks.md).
 *
 *   npx tsx bench/rpc.ts                       (after npm run build; `npm run bench` does both)
 *   BENCH_SECONDS=5 npx tsx bench/rpc.ts       (longer runs)
 *   BENCH_CPU_PROF=prof npx tsx bench/rpc.ts   (CPU profile of the daemon into ./prof)
 */
import os from 'node:os';
import path from 'node:path';
import { runLoad, type LoadResult } from './lib/load.js';
import { cpuTimeMs, median, medianWallTimes, residentMiB } from './lib/measure.js';
import { AGENTCTL_BIN, makeTempDir, startBaseline, startDaemon, type Child } from './lib/processes.js';
import { renderTable } from './lib/table.js';
import { requestUnix } from './lib/unix-http.js';

/** Seconds per measured run; each target gets ROUNDS runs per concurrency. */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const ROUNDS = 3;
const CONCURRENCY = [1, 64] as const;
const CLI_RUNS = 15;
const IDLE_MS = 2000;
const TARGET_RATIO = 0.85;
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'status' });

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
    `per target and concurrency: ${ROUNDS} alternating runs of ${SECONDS} s after a 1 s warm-up, medians`,
    `POST /rpc ${BODY}`,
  ].join('\n');
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

/**
 * Daemon and baseline in alternating rounds, medians over the rounds: on a shared machine a
 * burst of other work then skews one round of each, not the whole comparison.
 */
async function compare(daemon: Child, baseline: Child, connections: number) {
  for (const target of [daemon, baseline]) {
    // A short warm-up so that JIT and connection setup do not count.
    await runLoad({ socketPath: target.socket, path: '/rpc', body: BODY, connections, durationSeconds: 1 });
  }
  const d: Measured[] = [];
  const b: Measured[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    d.push(await measure(daemon, connections));
    b.push(await measure(baseline, connections));
  }
  return { d: medianRun(d), b: medianRun(b) };
}

function loadRows(c: number, d: Measured, b: Measured): (string | number)[][] {
  return [
    ['agentd status', String(c), d.rps, d.p50, d.p99, d.cpuUs, d.sysUs, String(d.failures)],
    ['node:http baseline', String(c), b.rps, b.p50, b.p99, b.cpuUs, b.sysUs, String(b.failures)],
    [
      'ratio agentd/baseline',
      String(c),
      d.rps / b.rps,
      d.p50 / b.p50,
      d.p99 / b.p99,
      d.cpuUs / b.cpuUs,
      d.sysUs / b.sysUs,
      '',
    ],
  ];
}

async function main(): Promise<void> {
  console.log(header());
  const tmp = await makeTempDir('agentd-bench-rpc-');
  const children: Child[] = [];
  try {
    const profDir = process.env.BENCH_CPU_PROF;
    const daemon = await startDaemon(tmp.dir, {
      nodeArgs: profDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profDir)}`] : [],
    });
    children.push(daemon);
    // Idle RSS: after startup and a short idle, before any load.
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const idleRss = await residentMiB(daemon.pid);

    const statusAnswer = await requestUnix(daemon.socket, 'POST', '/rpc', BODY);
    if (statusAnswer.status !== 200 || !statusAnswer.body.includes('"result"')) {
      throw new Error(`status answered HTTP ${statusAnswer.status}: ${statusAnswer.body.slice(0, 300)}`);
    }
    const baseline = await startBaseline(tmp.dir, statusAnswer.body);
    children.push(baseline);
    const baselineRss = await residentMiB(baseline.pid);

    const rows: (string | number)[][] = [];
    const ratios = new Map<number, number>();
    const cpuRatios = new Map<number, number>();
    for (const c of CONCURRENCY) {
      const { d, b } = await compare(daemon, baseline, c);
      ratios.set(c, d.rps / b.rps);
      cpuRatios.set(c, d.cpuUs / b.cpuUs);
      rows.push(...loadRows(c, d, b));
    }
    const loadedRss = await residentMiB(daemon.pid);

    const [ctl, bare] = await medianWallTimes(
      [
        { file: process.execPath, args: [AGENTCTL_BIN, '--socket', daemon.socket, 'status', '--json'] },
        { file: process.execPath, args: ['-e', '0'] },
      ],
      CLI_RUNS,
    );

    console.log('\nThroughput, latency (ms) and server CPU per request (µs)\n');
    console.log(
      renderTable(
        ['target', 'concurrency', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'sys µs/req', 'errors'],
        rows,
      ),
    );
    console.log('\nMemory and CLI\n');
    console.log(
      renderTable(
        ['measure', 'value'],
        [
          ['agentd RSS, idle after start (MiB)', idleRss],
          ['agentd RSS, after the load runs (MiB)', loadedRss],
          ['node:http baseline RSS, idle (MiB)', baselineRss],
          [`agentctl status --json, median of ${CLI_RUNS} (ms)`, ctl!],
          [`node -e 0, median of ${CLI_RUNS} (ms)`, bare!],
          ['agentctl cost over a bare node start (ms)', ctl! - bare!],
        ],
      ),
    );
    const at64 = ratios.get(64) ?? Number.NaN;
    const cpu64 = cpuRatios.get(64) ?? Number.NaN;
    console.log(
      [
        `\nratio agentd/baseline req/s at concurrency 64: ${at64.toFixed(2)} (target ≥ ${TARGET_RATIO}: ${at64 >= TARGET_RATIO ? 'met' : 'NOT met'})`,
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
