/**
 * The vitest part of `npm test` (docs/testing.md): the `unit` and `main` projects (unit tests,
 * then integration and system tests: CPU and short waits) in one vitest process, and the `host`
 * project (the real-host suite: minutes per file, mostly waiting on real systemd) in another,
 * side by side, so the hosts' waiting overlaps the CPU work. The first one's output streams as it
 * comes; `host`'s lines are prefixed with `[host]`. Exits non-zero when any fails; Ctrl-C or
 * SIGTERM reaches all.
 *
 * AGENTD_TEST_SECOND_RUNTIME (CI sets it): once `unit` and `main` have ended, the unit and
 * integration tests run again on a second Node runtime, beside what is left of the real-host
 * suite — `release` for the Node LTS the release executable embeds
 * (scripts/release/node-runtime.ts), or the path of a `node`. Its lines are prefixed with
 * `[node vX.Y.Z]`.
 *
 * The `cluster` project (test/cluster: agentd against a real control plane, docs/testing.md "The
 * real control plane") runs in a third vitest process, one file at a time, beside the real-host
 * suite, once `scripts/control-plane.sh` has built the control plane or found it in its cache
 * (a cold build takes minutes; the other tests run meanwhile). Its lines are prefixed with
 * `[cluster]`. When it cannot be built the cluster tests are skipped with the script's message,
 * and fail under AGENTD_REQUIRE_SYSTEM_TESTS=1.
 *
 * Arguments are passed to every run (e.g. `npm test -- --bail 1`).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ensureNodeRuntime } from './release/node-runtime.js';

/** Arguments for every run; with filters one project may match no file, which is then no failure. */
const ARGS = process.argv.length > 2 ? ['--passWithNoTests', ...process.argv.slice(2)] : [];
const VITEST = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));
/**
 * The real-host files each drive a host of their own, mostly waiting on systemd: three at a time
 * (about 1700 s of files, the longest part of a CI run: two at a time took 900 s).
 */
const HOST_WORKERS = '3';

interface Run {
  child: ChildProcess;
  done: Promise<number>;
}

/**
 * What failed, kept for the end: CI logs are often read from their tail, which then names each
 * failed test and its first error line, whichever run it came from, instead of only the last
 * run's. Lines are kept without their colours, at most DIGEST_PER_RUN per run.
 */
const digest: string[] = [];
const DIGEST_PER_RUN = 25;
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;
function keepForDigest(prefix: string, line: string, kept: { n: number; failures: boolean }): void {
  const plain = line.replace(ANSI, '');
  // Error lines count only in vitest's failure report (after "Failed Tests"), not in test logs.
  if (/Failed Tests \d+/.test(plain)) kept.failures = true;
  const failed = /^\s*(FAIL|×)\s/.test(plain) || (kept.failures && /^\s*\S*Error(\s\[\w+\])?: /.test(plain));
  if (!failed) return;
  if (kept.n >= DIGEST_PER_RUN) return;
  const entry = `${prefix}${plain.trim()}`.slice(0, 300);
  if (digest.includes(entry)) return;
  kept.n += 1;
  digest.push(entry);
}

/** One vitest process: `projects` with `extra` arguments on `node`, its lines prefixed unless null. */
function run(
  projects: string[],
  extra: string[],
  prefix: string | null,
  node = process.execPath,
  moreEnv: NodeJS.ProcessEnv = {},
): Run {
  // What the tests start as `node` (and as `process.execPath`) is this runtime too.
  const env = {
    ...process.env,
    ...moreEnv,
    PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH ?? ''}`,
  };
  const args = [VITEST, 'run', ...projects.flatMap((p) => ['--project', p]), ...extra, ...ARGS];
  const child = spawn(node, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const kept = { n: 0, failures: false };
  const label = prefix ?? `[${projects.join(', ')}] `;
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, prefix === null ? process.stderr : process.stdout],
  ] as const) {
    if (!stream) continue;
    createInterface({ input: stream }).on('line', (line) => {
      out.write(`${prefix ?? ''}${line}\n`);
      keepForDigest(label, line, kept);
    });
  }
  const done = new Promise<number>((resolve) => {
    child.on('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
    child.on('error', (err) => {
      process.stderr.write(`vitest ${projects.join(', ')}: ${err.message}\n`);
      resolve(1);
    });
  });
  return { child, done };
}

/** The second runtime's `node` (AGENTD_TEST_SECOND_RUNTIME), or null when none is asked for. */
async function secondRuntime(): Promise<string | null> {
  const wanted = process.env.AGENTD_TEST_SECOND_RUNTIME;
  if (!wanted) return null;
  return wanted === 'release' ? (await ensureNodeRuntime()).node : path.resolve(wanted);
}

const CONTROL_PLANE_SCRIPT = fileURLToPath(new URL('./control-plane.sh', import.meta.url));
const CLUSTER_PREFIX = '[cluster] ';

/** Build the control plane (or find it cached): its bin dir, or null with the script's stderr shown. */
function buildControlPlane(): Promise<string | null> {
  return new Promise((resolve) => {
    const child = spawn('bash', [CONTROL_PLANE_SCRIPT], { stdio: ['ignore', 'pipe', 'pipe'] });
    runs.push({ child, done: Promise.resolve(0) });
    let out = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString('utf8')));
    // The build's last lines go into the digest when it fails: they say why.
    const last: string[] = [];
    if (child.stderr)
      createInterface({ input: child.stderr }).on('line', (line) => {
        process.stdout.write(`${CLUSTER_PREFIX}${line}\n`);
        last.push(`${CLUSTER_PREFIX}${line.slice(0, 300)}`);
        if (last.length > 10) last.shift();
      });
    child.on('error', (err) => {
      process.stdout.write(`${CLUSTER_PREFIX}scripts/control-plane.sh: ${err.message}\n`);
      digest.push(`${CLUSTER_PREFIX}scripts/control-plane.sh: ${err.message}`);
      resolve(null);
    });
    child.on('close', (code) => {
      if (code !== 0) digest.push(`${CLUSTER_PREFIX}scripts/control-plane.sh exited ${code}:`, ...last);
      resolve(code === 0 ? out.trim().split('\n').pop() || null : null);
    });
  });
}

/** The cluster tests, once the control plane is there; their exit code. */
async function clusterTests(): Promise<number> {
  const bin = await buildControlPlane();
  if (stopping) return 1;
  if (bin === null) {
    const required = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';
    const said = `${CLUSTER_PREFIX}the control plane could not be built: the cluster tests are ${required ? 'FAILED (AGENTD_REQUIRE_SYSTEM_TESTS=1)' : 'skipped'}`;
    process.stdout.write(`${said}\n`);
    if (required) digest.push(said);
    return required ? 1 : 0;
  }
  const cluster = run(['cluster'], ['--maxWorkers', '1'], CLUSTER_PREFIX, process.execPath, {
    AGENTD_CONTROL_PLANE_BIN: bin,
  });
  runs.push(cluster);
  return cluster.done;
}

const runs: Run[] = [];
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    stopping = true;
    for (const r of runs) r.child.kill(signal);
  });
}

// Fetched (or found in the cache) while the tests run; a failure to get it fails the run.
const second = secondRuntime().then(
  (node) => ({ node, error: null }),
  (err: unknown) => ({ node: null, error: err instanceof Error ? err.message : String(err) }),
);
const host = run(['host'], ['--maxWorkers', HOST_WORKERS], '[host] ');
const main = run(['unit', 'main'], [], null);
runs.push(host, main);
const clusterDone = clusterTests();

const mainCode = await main.done;
const { node: secondNode, error: secondError } = await second;
let secondCode: number | null = null;
let secondLabel = '';
if (secondError !== null) {
  process.stderr.write(`second runtime (AGENTD_TEST_SECOND_RUNTIME): ${secondError}\n`);
  secondCode = 1;
} else if (secondNode !== null && !stopping) {
  secondLabel = spawnSync(secondNode, ['--version'], { encoding: 'utf8' }).stdout.trim() || secondNode;
  process.stdout.write(
    `\nnpm test: unit and main on Node ${process.version} ended; the unit and integration tests again on ${secondLabel}\n`,
  );
  const again = run(
    ['unit', 'main'],
    // The unit and integration tests: not the system tests, which check this machine's tools.
    ['--exclude', 'test/system/**'],
    `[node ${secondLabel}] `,
    secondNode,
    { AGENTD_TEST_FOREIGN_DIST: '1' },
  );
  runs.push(again);
  secondCode = await again.done;
}
const hostCode = await host.done;
const clusterCode = await clusterDone;

if (digest.length > 0)
  process.stdout.write(`\nnpm test: what failed, from each run's output above\n${digest.join('\n')}\n`);
const word = (code: number): string => (code === 0 ? 'passed' : `FAILED (${code})`);
process.stdout.write(
  `\nnpm test: unit and main projects ${word(mainCode)}, real-host project ${word(hostCode)}, cluster project ${word(clusterCode)}` +
    (secondCode === null
      ? ''
      : `, unit and integration tests on ${secondLabel || 'the second runtime'} ${word(secondCode)}`) +
    '\n',
);
process.exit([mainCode, hostCode, clusterCode, secondCode ?? 0].find((c) => c !== 0) ?? 0);
