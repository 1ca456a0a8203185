/**
 * CLI startup benchmark: wall time of `agentctl status --json` against a running daemon,
 * next to `node -e 0` (the floor of any Node CLI) and `curl --unix-socket` making the same
 * `status` call (the floor of the call itself), all measured interleaved in the same run.
 * With a release (`npm run release`), also the release executable's `agentctl status --json`
 * next to `node -e 0` of the Node runtime it embeds. Target: agentctl ≤ 1.3 × `node -e 0` of the
 * same runtime.
 *
 *   npx tsx bench/cli.ts                  (after npm run build; `npm run bench` does both)
 *   BENCH_RUNS=40 npx tsx bench/cli.ts    (more samples)
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { medianWallTimes } from './lib/measure.js';
import { AGENTCTL_BIN, makeTempDir, startDaemon } from './lib/processes.js';
import { unpackRelease } from './lib/release.js';
import { renderTable } from './lib/table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const TARGET_RATIO = 1.3;
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
        .join(' ')} at start; median of ${RUNS} runs each, interleaved, after one warm-up`,
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
    const medians = await medianWallTimes(commands, RUNS);
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
    const ratio = agentctl / node;
    console.log(
      `agentctl's own cost over a bare Node start: ${(agentctl - node).toFixed(1)} ms` +
        (curl !== undefined
          ? `; over curl making the same call: ${(agentctl - curl).toFixed(1)} ms`
          : ' (curl not found)'),
    );
    console.log(
      `ratio agentctl / node -e 0 = ${ratio.toFixed(2)} (target ≤ ${TARGET_RATIO}): ${ratio <= TARGET_RATIO ? 'met' : 'NOT met'}`,
    );
    if (rel) {
      const n = commands.length;
      const releaseRatio = (medians[n - 1] ?? Number.NaN) / (medians[n - 2] ?? Number.NaN);
      console.log(
        `release executable: ratio agentctl / node -e 0 (v${rel.nodeVersion}) = ${releaseRatio.toFixed(2)} (target ≤ ${TARGET_RATIO}): ${releaseRatio <= TARGET_RATIO ? 'met' : 'NOT met'}`,
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
