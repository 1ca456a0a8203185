/**
 * CLI startup benchmark: wall time of `agentctl status --json` against a running daemon,
 * next to `node -e 0` (the floor of any Node CLI) and `curl --unix-socket` making the same
 * `status` call (the floor of the call itself), all measured interleaved in the same run.
 * Target: agentctl ≤ 2 × `node -e 0`.
 *
 *   npx tsx bench/cli.ts                  (after npm run build; `npm run bench` does both)
 *   BENCH_RUNS=40 npx tsx bench/cli.ts    (more samples)
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { medianWallTimes } from './lib/measure.js';
import { AGENTCTL_BIN, makeTempDir, startDaemon } from './lib/processes.js';
import { renderTable } from './lib/table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const TARGET_RATIO = 2;
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
    const commands = [
      { name: '`node -e 0`', file: process.execPath, args: ['-e', '0'] },
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
    ];
    const medians = await medianWallTimes(commands, RUNS);
    const node = medians[0] ?? Number.NaN;
    const agentctl = medians[1] ?? Number.NaN;
    const curl = medians[2];
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
  } finally {
    await daemon.stop();
    await tmp.cleanup();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
