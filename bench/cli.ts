/**
 * CLI startup benchmark: wall time of `agentctl status --json` against a running daemon,
 * next to `node -e 0` (the floor of any Node CLI) and `curl --unix-socket` making the same
 * `status` call (the floor of the call itself), all measured interleaved in the same run.
 * With a release (`npm run release`), also the release executable's `agentctl status --json`
 * next to `node -e 0` of the Node runtime it embeds. Target: agentctl ≤ 1.5 × `node -e 0` of the
 * same runtime, read as the median of the per-round ratios (`pairedRatio`: each round runs the
 * two a few milliseconds apart, so a VM's drift cancels); the ratio of the two medians is printed
 * beside it. The release executable and its runtime are read from disk first, as on a host after
 * a boot (bench/lib/release.ts).
 *
 *   npx tsx bench/cli.ts                  (after npm run build; `npm run bench` does both)
 *   BENCH_RUNS=40 npx tsx bench/cli.ts    (more samples)
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { median, pairedRatio, wallTimeSamples } from './lib/measure.js';
import { AGENTCTL_BIN, makeTempDir, startDaemon } from './lib/processes.js';
import { unpackRelease } from './lib/release.js';
import { renderTable } from './lib/table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 40);
const TARGET_RATIO = 1.5;
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'status' });

function hasCurl(): boolean {
  return spawnSync('curl', ['--version'], { stdio: 'ignore' }).status === 0;
}

async function main(): Promise<void> {
  const cpus = os.cpus();
  console.log(
    [
      `agentctl startup benchmark, ${new Date().toISOString()}`,
      `node ${process.version}, ${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown cpu'}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} at start; ${RUNS} rounds, each command once per round, after one warm-up each`,
    ].join('\n'),
  );
  const tmp = await makeTempDir('agentd-bench-cli-');
  const daemon = await startDaemon(tmp.dir);
  try {
    const rel = await unpackRelease(tmp.dir);
    const commands = [
      { name: `\`node -e 0\` (${process.version})`, file: process.execPath, args: ['-e', '0'] },
      {
        name: '`agentctl status --json`',
        file: process.execPath,
        args: [AGENTCTL_BIN, '--socket', daemon.socket, '--json', 'status'],
      },
      ...(hasCurl()
        ? [
            {
              name: '`curl --unix-socket` (same call)',
              file: 'curl',
              args: [
                '-sf',
                '--unix-socket',
                daemon.socket,
                '-H',
                'content-type: application/json',
                '-d',
                BODY,
                'http://agentd/rpc',
              ],
            },
          ]
        : []),
      ...(rel
        ? [
            { name: `\`node -e 0\` (v${rel.nodeVersion})`, file: rel.node, args: ['-e', '0'] },
            {
              name: 'release `agentctl status --json`',
              file: rel.agentctl,
              args: ['--socket', daemon.socket, '--json', 'status'],
            },
          ]
        : []),
    ];
    const samples = await wallTimeSamples(commands, RUNS);
    const medians = samples.map(median);
    const node = medians[0] ?? Number.NaN;
    const agentctl = medians[1] ?? Number.NaN;
    const curlIndex = commands.findIndex((c) => c.file === 'curl');
    const curl = curlIndex >= 0 ? medians[curlIndex] : undefined;
    console.log(
      `\n${renderTable(
        ['command', 'median ms', '× node -e 0'],
        commands.map((c, i) => [c.name, medians[i] ?? Number.NaN, (medians[i] ?? Number.NaN) / node]),
      )}\n`,
    );
    /** "1.17 (middle half 1.12–1.21; ratio of medians 1.18) (target ≤ 1.5): met" */
    const verdict = (of: number, to: number): string => {
      const p = pairedRatio(samples[of] ?? [], samples[to] ?? []);
      const ofMedians = (medians[of] ?? Number.NaN) / (medians[to] ?? Number.NaN);
      return `${p.median.toFixed(2)} (middle half ${p.q1.toFixed(2)}–${p.q3.toFixed(2)}; ratio of medians ${ofMedians.toFixed(2)}) (target ≤ ${TARGET_RATIO}): ${p.median <= TARGET_RATIO ? 'met' : 'NOT met'}`;
    };
    console.log(
      `agentctl's own cost over a bare Node start: ${(agentctl - node).toFixed(1)} ms` +
        (curl !== undefined
          ? `; over curl making the same call: ${(agentctl - curl).toFixed(1)} ms`
          : ' (curl not found)'),
    );
    console.log(`ratio agentctl / node -e 0, median of ${RUNS} rounds' ratios = ${verdict(1, 0)}`);
    if (rel) {
      const n = commands.length;
      console.log(
        `release executable: ratio agentctl / node -e 0 (v${rel.nodeVersion}), median of ${RUNS} rounds' ratios = ${verdict(n - 1, n - 2)}`,
      );
    } else console.log('no release/ tarball: run npm run release to measure the release executable');
  } finally {
    await daemon.stop();
    await tmp.cleanup();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
