/**
 * The real down window (the real-systemd issue, item 7): on a real systemd host with real
 * nspawn machines (the real-host harness of docs/testing.md), how long the node serves no
 * kubelet during an update — from the moment the source machine's stop begins to the moment
 * the target's kubelet is verified — in agentd's order against the upstream agent's, measured
 * the same way in the same run.
 *
 * - agentd's order: the installed daemon (`agentd.service`, `--host systemd`) runs
 *   `agentctl update`; the window is the `stop` phase's start to the `verify` phase's end, from
 *   the operation's own phase timestamps.
 * - the upstream order: with agentd.service stopped, `bench/lib/real-upstream-switch.ts` runs
 *   inside the host with agentd's own production pieces in upstream's order (stop the source,
 *   then provision, stage, start, verify the target), timed from the stop's start to verify.
 *
 * Rounds alternate (agentd kube1→kube2, upstream kube2→kube1), each to a Kubernetes version not
 * seen before, so both download the kube binaries afresh and take the rootfs from the blob cache.
 *
 * Run as root: `npx tsx bench/real-down-window.ts` (BENCH_ROUNDS=3). Needs the real-host tools
 * (docs/testing.md). Prints medians and the ratio; no assertions on time.
 */
import { startRealNode } from '../test/support/real-host/node.js';
import { REPO } from '../test/support/real-host/install.js';
import { renderTable } from './lib/table.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

interface Phase {
  name: string;
  startedAt: string | null;
  finishedAt: string | null;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

async function main(): Promise<void> {
  // The upstream order runs from this checkout, with this machine's Node.js.
  const node = await startRealNode({
    label: 'bench',
    nspawnArgs: [`--bind-ro=${REPO}:/repo`, '--bind-ro=/usr/bin/node'],
  });
  try {
    await node.waitReady();
    const join = await node.agentctlJson<{ state: string }>(
      ['update', '--config', await node.configFile(node.agentConfig())],
      0,
      600_000,
    );
    if (join.state !== 'succeeded') throw new Error(`join: ${JSON.stringify(join)}`);

    const ours: number[] = [];
    const ourProvision: number[] = [];
    const upstream: number[] = [];
    const upstreamProvision: number[] = [];
    let minor = 40;
    for (let round = 0; round < ROUNDS; round++) {
      // agentd's order, through the daemon: kube1 → kube2.
      const op = await node.agentctlJson<{ state: string; phases: Phase[] }>(
        ['update', '--kubernetes-version', `1.${minor++}.0`],
        0,
        600_000,
      );
      if (op.state !== 'succeeded') throw new Error(`agentd update: ${JSON.stringify(op)}`);
      const at = (name: string, key: 'startedAt' | 'finishedAt'): number =>
        Date.parse(op.phases.find((p) => p.name === name)?.[key] ?? '');
      ours.push(at('verify', 'finishedAt') - at('stop', 'startedAt'));
      ourProvision.push(at('stage', 'finishedAt') - at('provision', 'startedAt'));

      // The upstream order, with agentd stopped so nothing else acts: kube2 → kube1.
      await node.host.execOk(['systemctl', 'stop', 'agentd.service']);
      const res = await node.host.execOk(
        ['node', '--import', 'tsx', 'bench/lib/real-upstream-switch.ts', 'kube2', 'kube1', `1.${minor++}.0`],
        { timeoutMs: 600_000, env: { HOME: '/root' }, cwd: '/repo' },
      );
      const sample = JSON.parse(res.stdout.trim().split('\n').pop() ?? '{}') as {
        downMs: number;
        provisionMs: number;
      };
      upstream.push(sample.downMs);
      upstreamProvision.push(sample.provisionMs);
      await node.host.execOk(['systemctl', 'start', 'agentd.service']);
      await node.waitReady();
    }

    console.log(
      `Down window on a real systemd host (systemd-nspawn machines), medians of ${ROUNDS} rounds\n`,
    );
    console.log(
      renderTable(
        ['order', 'down window ms', 'provision + stage ms', 'samples'],
        [
          [
            'agentd (provision before stop)',
            median(ours).toFixed(0),
            median(ourProvision).toFixed(0),
            ours.map((x) => x.toFixed(0)).join(' '),
          ],
          [
            'upstream (provision after stop)',
            median(upstream).toFixed(0),
            median(upstreamProvision).toFixed(0),
            upstream.map((x) => x.toFixed(0)).join(' '),
          ],
        ],
      ),
    );
    console.log(`\nratio agentd / upstream (down window): ${(median(ours) / median(upstream)).toFixed(2)}`);
  } finally {
    await node.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
