/**
 * The real down window (docs/benchmarks.md, "The real down window"): on a real systemd host with
 * real nspawn machines (the real-host harness of docs/testing.md), how long the node serves no
 * kubelet during an update, in three orders measured the same way in the same run, alternating:
 *
 * - agentd's standby order (the default, docs/architecture.md "Hot standby"): the target boots
 *   beside the source before the window; the window moves kubelet and containerd only;
 * - agentd's cold order (`--switch-order cold`): the source machine stops, the target boots in the
 *   window;
 * - the upstream order: with agentd.service stopped, `bench/lib/real-upstream-switch.ts` runs inside
 *   the host with agentd's own production pieces in upstream's order (stop the source, then
 *   provision, stage, start, verify the target).
 *
 * agentd's window is its `stop` phase's start to its `verify` phase's end (the operation's own
 * timestamps). Beside them, in the same rounds:
 *
 * - the floor: in the serving, booted machine, with agentd stopped, the same two commands the
 *   standby switch runs (`systemctl stop kubelet.service containerd.service`, then `systemctl
 *   enable --now containerd.service kubelet.service`) and the wait for kubelet's /healthz, timed
 *   inside the host;
 * - the rollback window of each agentd order: an update to a kubelet that runs but never answers
 *   /healthz (the mirror's `unhealthyKubelet`), from the `stop` phase's start to the end of the
 *   rollback (the source verified again). Most of it is the wait for the unhealthy kubelet
 *   (`verifyTimeout`, 15 s on these nodes, the same in every order), so it is shown without that
 *   wait as well: the steps the order itself takes.
 *
 * And once: the memory a machine booted in standby holds (the PSS and anonymous memory of its
 * processes, read while agentd is stopped at `update.standby.after`), against the serving machine's.
 *
 * Run as root: `npx tsx bench/real-down-window.ts` (BENCH_ROUNDS=3). Needs the real-host tools
 * (docs/testing.md). Prints medians and ratios; no assertions on time.
 */
import { startRealNode, type RealNode } from '../test/support/real-host/node.js';
import { REPO } from '../test/support/real-host/install.js';
import {
  armFailpoints,
  disarmFailpoints,
  resume,
  setSwitchOrder,
  waitStopped,
} from '../test/support/real-host/agentd-unit.js';
import { renderTable } from './lib/table.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Kubelet versions from 1.90 on run but never answer /healthz (the rollback rounds). */
const UNHEALTHY = '^1\\.9[0-9]\\.';

interface Phase {
  name: string;
  startedAt: string | null;
  finishedAt: string | null;
}
interface Op {
  id: string;
  state: string;
  phases: Phase[];
  result?: { switchOrder?: string } | null;
}
type Order = 'standby' | 'cold';
interface MachineMemory {
  pss: number;
  anonymous: number;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const at = (op: Op, name: string, key: 'startedAt' | 'finishedAt'): number =>
  Date.parse(op.phases.find((p) => p.name === name)?.[key] ?? '');

async function restartAgentd(node: RealNode): Promise<void> {
  await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
  await node.waitReady();
}

async function useOrder(node: RealNode, order: Order): Promise<void> {
  await setSwitchOrder(node, order);
  await restartAgentd(node);
}

async function activeMachine(node: RealNode): Promise<string> {
  const status = await node.agentctlJson<{ node: { activeMachine: string } }>(['status']);
  return status.node.activeMachine;
}

/** An update through the daemon in the order set; `exit` 0 for one that succeeds, 1 for a rollback. */
async function update(node: RealNode, version: string, order: Order, exit: 0 | 1): Promise<Op> {
  const op = await node.agentctlJson<Op>(['update', '--kubernetes-version', version], exit, 600_000);
  const want = exit === 0 ? 'succeeded' : 'rolled_back';
  if (op.state !== want || op.result?.switchOrder !== order)
    throw new Error(`${order} update to ${version}: ${JSON.stringify(op)}`);
  return op;
}

/** The floor: kubelet and containerd stopped and started in a booted machine, timed in the host. */
async function floor(node: RealNode): Promise<number> {
  const m = await activeMachine(node);
  await node.host.execOk(['systemctl', 'stop', 'agentd.service']);
  try {
    const script = [
      'set -e',
      't0=$(date +%s%N)',
      `systemd-run --machine=${m} --pipe --wait systemctl stop kubelet.service containerd.service`,
      `systemd-run --machine=${m} --pipe --wait systemctl enable --now containerd.service kubelet.service`,
      // The host's rootfs has no curl: bash's /dev/tcp asks kubelet's /healthz, as agentd's verify does.
      'healthy() { exec 3<>/dev/tcp/127.0.0.1/10248 && printf "GET /healthz HTTP/1.0\\r\\n\\r\\n" >&3 && grep -q "^ok" <&3; }',
      'deadline=$(( $(date +%s) + 60 ))',
      'until (healthy) 2>/dev/null; do [ $(date +%s) -lt $deadline ] || { echo "kubelet not healthy" >&2; exit 1; }; sleep 0.02; done',
      't1=$(date +%s%N)',
      'echo $(( (t1 - t0) / 1000000 ))',
    ].join('\n');
    const res = await node.host.execOk(['bash', '-c', script], { timeoutMs: 120_000 });
    return Number(res.stdout.trim().split('\n').pop());
  } finally {
    await node.host.execOk(['systemctl', 'start', 'agentd.service']);
    await node.waitReady();
  }
}

/**
 * The memory (MiB) of the target booted in standby, and of the serving machine, at that moment:
 * the PSS and the anonymous memory of each machine's processes (the harness's host cgroup has no
 * memory controller, so no memory.current).
 */
async function standbyMemory(
  node: RealNode,
  version: string,
): Promise<{ standby: MachineMemory; serving: MachineMemory }> {
  const source = await activeMachine(node);
  const target = source === 'kube1' ? 'kube2' : 'kube1';
  await armFailpoints(node, ['stop:update.standby.after']);
  await restartAgentd(node);
  const started = await node.agentctlJson<Op>(['update', '--kubernetes-version', version, '--detach']);
  const pid = await waitStopped(node, 'update.standby.after');
  const mib = async (m: string): Promise<MachineMemory> => {
    const script = [
      `cg=$(systemctl show -p ControlGroup --value systemd-nspawn@${m}.service)`,
      'find /sys/fs/cgroup$cg -name cgroup.procs -exec cat {} + | while read p; do',
      "  awk '/^(Pss|Anonymous):/{print $1, $2}' /proc/$p/smaps_rollup 2>/dev/null",
      `done | awk '{s[$1]+=$2} END {print s["Pss:"] / 1024, s["Anonymous:"] / 1024}'`,
    ].join('\n');
    const [pss, anon] = (await node.host.execOk(['bash', '-c', script])).stdout.trim().split(' ').map(Number);
    return { pss: pss ?? NaN, anonymous: anon ?? NaN };
  };
  const out = { standby: await mib(target), serving: await mib(source) };
  await resume(node, pid);
  await disarmFailpoints(node);
  for (let op = started; ;) {
    if (op.state !== 'running' && op.state !== 'pending') {
      if (op.state !== 'succeeded') throw new Error(`the memory round's update: ${JSON.stringify(op)}`);
      break;
    }
    await new Promise((r) => setTimeout(r, 500));
    op = await node.agentctlJson<Op>(['ops', 'get', started.id]);
  }
  await restartAgentd(node);
  return out;
}

async function main(): Promise<void> {
  // The upstream order runs from this checkout, with this machine's Node.js.
  const node = await startRealNode({
    label: 'bench',
    nspawnArgs: [`--bind-ro=${REPO}:/repo`, '--bind-ro=/usr/bin/node'],
    unhealthyKubelet: UNHEALTHY,
  });
  try {
    await node.waitReady();
    const join = await node.agentctlJson<{ state: string }>(
      ['update', '--config', await node.configFile(node.agentConfig())],
      0,
      600_000,
    );
    if (join.state !== 'succeeded') throw new Error(`join: ${JSON.stringify(join)}`);

    const down: Record<Order | 'upstream', number[]> = { standby: [], cold: [], upstream: [] };
    const rollback: Record<Order, number[]> = { standby: [], cold: [] };
    const rollbackSteps: Record<Order, number[]> = { standby: [], cold: [] };
    const floors: number[] = [];
    let minor = 40;
    let unhealthy = 90;
    for (let round = 0; round < ROUNDS; round++) {
      for (const order of ['standby', 'cold'] as const) {
        await useOrder(node, order);
        const op = await update(node, `1.${minor++}.0`, order, 0);
        down[order].push(at(op, 'verify', 'finishedAt') - at(op, 'stop', 'startedAt'));
        const rb = await update(node, `1.${unhealthy++}.0`, order, 1);
        const window = at(rb, 'rollback', 'finishedAt') - at(rb, 'stop', 'startedAt');
        const verifyWait = at(rb, 'verify', 'finishedAt') - at(rb, 'verify', 'startedAt');
        rollback[order].push(window);
        rollbackSteps[order].push(window - verifyWait);
      }
      await useOrder(node, 'standby');
      floors.push(await floor(node));

      // The upstream order, with agentd stopped so nothing else acts.
      const source = await activeMachine(node);
      const target = source === 'kube1' ? 'kube2' : 'kube1';
      await node.host.execOk(['systemctl', 'stop', 'agentd.service']);
      const res = await node.host.execOk(
        ['node', '--import', 'tsx', 'bench/lib/real-upstream-switch.ts', source, target, `1.${minor++}.0`],
        { timeoutMs: 600_000, env: { HOME: '/root' }, cwd: '/repo' },
      );
      const sample = JSON.parse(res.stdout.trim().split('\n').pop() ?? '{}') as { downMs: number };
      down.upstream.push(sample.downMs);
      await node.host.execOk(['systemctl', 'start', 'agentd.service']);
      await node.waitReady();
    }
    const memory = await standbyMemory(node, `1.${minor++}.0`);

    const row = (name: string, xs: number[]): string[] => [
      name,
      median(xs).toFixed(0),
      xs.map((x) => x.toFixed(0)).join(' '),
    ];
    console.log(
      `Down window on a real systemd host (systemd-nspawn machines), medians of ${ROUNDS} rounds\n`,
    );
    console.log(
      renderTable(
        ['measure', 'median ms', 'samples'],
        [
          row('down window, standby order (default)', down.standby),
          row('down window, cold order', down.cold),
          row('down window, upstream order', down.upstream),
          row('floor: stop + start kubelet and containerd in a booted machine', floors),
          row('rollback window, standby order', rollback.standby),
          row('  without the verify wait', rollbackSteps.standby),
          row('rollback window, cold order', rollback.cold),
          row('  without the verify wait', rollbackSteps.cold),
        ],
      ),
    );
    const ratio = (a: number[], b: number[]): string => (median(a) / median(b)).toFixed(2);
    console.log(`\nratio standby / cold (down window): ${ratio(down.standby, down.cold)} (target ≤ 0.5)`);
    console.log(`ratio standby / upstream (down window): ${ratio(down.standby, down.upstream)}`);
    console.log(`ratio standby down window / floor: ${ratio(down.standby, floors)} (target ≤ 1.5)`);
    console.log(
      `ratio standby rollback window / standby down window: ${ratio(rollback.standby, down.standby)}; without the verify wait ${ratio(rollbackSteps.standby, down.standby)} (target ≤ 1.5)`,
    );
    const mem = (x: MachineMemory): string =>
      `PSS ${x.pss.toFixed(1)} MiB, anonymous ${x.anonymous.toFixed(1)} MiB`;
    console.log(
      `memory of a machine in standby: ${mem(memory.standby)} (the serving machine: ${mem(memory.serving)})`,
    );
  } finally {
    await node.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
