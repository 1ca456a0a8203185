/**
 * Drive an HTTP endpoint on a unix socket with h2load (nghttp2's load generator, in C) and keep
 * the numbers the benches print.
 *
 * Why h2load and not a Node load generator: on a 2-core machine a generator written in Node
 * needs about a core of its own to keep 64 connections busy and still cannot saturate a Node
 * server, so the measure was of how the generator and the server shared the cores (the same
 * build's ratio scattered 0.73–0.91). h2load costs a fraction of the server's CPU per request,
 * so the server is the limit and its throughput is what is measured (docs/benchmarks.md, "RPC").
 *
 * With two or more CPUs the generator runs on the first and the servers on the last
 * (`pinServer`), each measured with a core of its own, as a server measured from another
 * machine would be.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface LoadResult {
  /** Requests per second over the run. */
  rps: number;
  /** Latency percentiles in milliseconds, from every response's own time (h2load's log). */
  p50: number;
  p99: number;
  /** Failed, errored and timed-out requests and non-2xx answers: a fair run has none. */
  failures: number;
  /** Requests answered 2xx. */
  requests: number;
}

export interface LoadOptions {
  socketPath: string;
  path: string;
  body: string;
  connections: number;
  durationSeconds: number;
  /** Requests per second per connection (h2load --rps); unset: as fast as the server answers. */
  rps?: number;
}

const INSTALL_HINT = 'h2load is missing: install it (Debian: apt-get install nghttp2-client)';

let checked = false;

/** Fails with how to install h2load when it is not on PATH. */
function requireH2load(): void {
  if (checked) return;
  try {
    execFileSync('h2load', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error(INSTALL_HINT);
  }
  checked = true;
}

/** The CPUs the generator and the servers run on, or null on a single CPU (no pinning). */
export function cpuPlan(): { generator: number; server: number } | null {
  const n = os.availableParallelism();
  return n >= 2 ? { generator: 0, server: n - 1 } : null;
}

/** Pin every thread of `pid` (and those it starts later) to the servers' CPU. */
export function pinServer(pid: number): void {
  const plan = cpuPlan();
  if (plan === null) return;
  execFileSync('taskset', ['--all-tasks', '--pid', '--cpu-list', String(plan.server), String(pid)], {
    stdio: 'ignore',
  });
}

/** The p-th percentile (0..100) of sorted values, nearest-rank. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** The numbers of h2load's summary; throws when it has none (h2load's own text is then the error). */
export function parseSummary(out: string): { rps: number; succeeded: number; failures: number } {
  const rps = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(out);
  const counts = /(\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
  if (!rps || !counts || !codes) throw new Error(`h2load printed no summary:\n${out}`);
  const [, , failed, errored, timeout] = counts.map(Number) as [number, number, number, number, number];
  const [, ok, c3, c4, c5] = codes.map(Number) as [number, number, number, number, number];
  return { rps: Number(rps[1]), succeeded: ok, failures: failed + errored + timeout + c3 + c4 + c5 };
}

/** Response times in ms of the 2xx rows of an h2load `--log-file` (start µs, status, duration µs). */
export function parseLog(text: string): Float64Array {
  const times: number[] = [];
  for (const line of text.split('\n')) {
    const [, status, micros] = line.split('\t');
    if (status !== undefined && status.startsWith('2') && micros !== undefined)
      times.push(Number(micros) / 1000);
  }
  return Float64Array.from(times).sort();
}

function run(file: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')}: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  requireH2load();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-load-'));
  try {
    const bodyFile = path.join(dir, 'body');
    const logFile = path.join(dir, 'log');
    await writeFile(bodyFile, o.body);
    const h2load = [
      'h2load',
      '--h1',
      `--base-uri=unix:${o.socketPath}`,
      `--clients=${o.connections}`,
      '--threads=1',
      `--duration=${Math.round(o.durationSeconds * 1000)}ms`,
      `--data=${bodyFile}`,
      '--header=content-type: application/json',
      `--log-file=${logFile}`,
      ...(o.rps !== undefined ? [`--rps=${o.rps}`] : []),
      `http://localhost${o.path}`,
    ];
    const plan = cpuPlan();
    const out = plan
      ? await run('taskset', ['--cpu-list', String(plan.generator), ...h2load])
      : await run(h2load[0]!, h2load.slice(1));
    const summary = parseSummary(out);
    const sorted = parseLog(await readFile(logFile, 'utf8'));
    return {
      rps: summary.rps,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      failures: summary.failures,
      requests: summary.succeeded,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
