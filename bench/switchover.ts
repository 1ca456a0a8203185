/**
 * Switch-over benchmark (issue 4, "Measure"): how long the node is down during an update, in
 * agentd's order (provision and stage the target while the source serves, then stop, start,
 * verify) against the upstream agent's order (stop the source first, then provision, stage,
 * start and verify the target), measured in the same run with the same per-command latency.
 *
 * Both run in this process on the simulated host, with the production engine pieces: the
 * Engine for agentd's order; the same machine manager and provisioner, called directly in the
 * upstream order, for the baseline. Every host command costs a fixed latency on both machines
 * (`latency=<ms>:*`); the local mirror serves artifacts and the rootfs image over loopback.
 *
 * Run: `npx tsx bench/switchover.ts` (BENCH_LATENCY_MS=20, BENCH_ROUNDS=5). Prints medians, the
 * host commands inside each down window, and the ratio; no assertions on time.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { AgentConfig } from '../src/config/agent-config.js';
import { createAppliedConfigStore } from '../src/engine/applied-config-store.js';
import { Engine } from '../src/engine/engine.js';
import { EventBus } from '../src/engine/events.js';
import { writeNodeState } from '../src/engine/node-state.js';
import type { TaskContext } from '../src/tasks/tasks.js';
import { systemClock } from '../src/host/clock.js';
import { createMachineManager } from '../src/host/machines.js';
import { createHostPaths } from '../src/host/paths.js';
import type { CommandResult, CommandRunner, MachineName, RunOptions } from '../src/host/types.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { createProvisioner } from '../src/provision/provisioner.js';
import { simDefaultConfig } from '../src/sim/default-config.js';
import { parseSimFaults } from '../src/sim/faults.js';
import { createSimHost } from '../src/sim/host/index.js';
import { startMirror } from '../src/sim/mirror/index.js';
import { renderTable } from './lib/table.js';
import { upstreamSwitch } from './lib/upstream-order.js';

const LATENCY_MS = Number(process.env.BENCH_LATENCY_MS ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** The machine manager's timings of `--host sim` (src/daemon/host-wiring.ts). */
const SIM_TIMEOUTS = { pollIntervalMs: 50, verifyMs: 3000, startMs: 10_000, stopMs: 10_000 };

/** A runner that counts the host commands started while `counting` is on. */
function countingRunner(
  inner: CommandRunner,
): CommandRunner & { counting: boolean; count: number; total: number } {
  const r = {
    counting: false,
    count: 0,
    total: 0,
    run(file: string, args: readonly string[], options?: RunOptions): Promise<CommandResult> {
      r.total += 1;
      if (r.counting) r.count += 1;
      return inner.run(file, args, options);
    },
  };
  return r;
}

interface Sample {
  downMs: number;
  commandsDown: number;
  wholeMs: number;
  /** Provision + stage of the target (null where the engine runs them). */
  provisionMs: number | null;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-switch-'));
  const root = path.join(work, 'root');
  const stateDir = path.join(work, 'state');
  await mkdir(path.join(root, 'etc'), { recursive: true });
  await writeFile(path.join(root, 'etc/hostname'), 'bench-host\n');
  await writeFile(path.join(root, 'etc/resolv.conf'), 'nameserver 127.0.0.1\n');
  const logger = pino({ level: 'silent' });
  const mirror = await startMirror();
  try {
    const paths = createHostPaths(root);
    const clock = systemClock;
    const sim = createSimHost({ root, clock, faults: parseSimFaults(`latency=${LATENCY_MS}:*`) });
    const runner = countingRunner(sim);
    const machines = createMachineManager({
      runner,
      paths,
      clock,
      logger,
      kubeletHealth: sim.kubeletHealthy,
      timeouts: SIM_TIMEOUTS,
    });
    const metrics = createMetrics({ version: 'bench', collectDefaults: false });
    const provisioner = createProvisioner({
      paths,
      stateDir,
      clock,
      logger,
      metrics,
      daemonReload: () => machines.daemonReload(),
      minFreeBytes: 64 * 1024 ** 2,
    });
    const events = new EventBus();
    const base = simDefaultConfig(mirror);
    const engine = new Engine({
      paths,
      stateDir,
      machines,
      provisioner,
      clock,
      logger,
      metrics,
      events,
      defaultConfig: () => structuredClone(base),
    });
    await engine.start();
    const applied = createAppliedConfigStore(paths);
    const ctx: TaskContext = {
      signal: new AbortController().signal,
      logger,
      progress: () => undefined,
      metrics,
    };

    // agentd's order, through the Engine: the down window runs from the stop phase's start to
    // the verify phase's end, taken from the engine's own (synchronous) phase events.
    const agentdUpdate = async (version: string): Promise<Sample> => {
      let downStart = 0;
      let downEnd = 0;
      const unsubscribe = events.subscribe((_seq, e) => {
        if (e.type !== 'phase') return;
        if (e.phase === 'stop' && e.state === 'running') {
          downStart = performance.now();
          runner.counting = true;
        } else if (e.phase === 'verify' && e.state === 'succeeded') {
          downEnd = performance.now();
          runner.counting = false;
        }
      });
      runner.count = 0;
      const t0 = performance.now();
      const op = await engine.update({
        set: { kubernetesVersion: version },
        wait: true,
        requestedBy: 'bench',
      });
      const wholeMs = performance.now() - t0;
      unsubscribe();
      if (op.state !== 'succeeded')
        throw new Error(`agentd update to ${version}: ${JSON.stringify(op.error)}`);
      return { downMs: downEnd - downStart, commandsDown: runner.count, wholeMs, provisionMs: null };
    };

    // The upstream order, driving the same pieces directly: stop the source, then provision,
    // stage, start and verify the target; then record it and remove the source.
    const upstreamUpdate = async (
      source: MachineName,
      target: MachineName,
      version: string,
    ): Promise<Sample> => {
      const config: AgentConfig = structuredClone(base);
      config.Cluster.Version = version;
      runner.count = 0;
      const t0 = performance.now();
      runner.counting = true;
      const { downMs, provisionMs } = await upstreamSwitch(
        { machines, provisioner, ctx },
        source,
        target,
        config,
      );
      runner.counting = false;
      const commandsDown = runner.count;
      await commitAndCleanUp(source, target, config);
      const wholeMs = performance.now() - t0;
      await engine.refreshNode(); // the engine sees the node as the measured ordering left it
      return { downMs, commandsDown, wholeMs, provisionMs };
    };

    // agentd's order again, with the same pieces driven directly: the down window without the
    // engine's bookkeeping (journal and history writes, events) — the floor of agentd's order.
    const directUpdate = async (
      source: MachineName,
      target: MachineName,
      version: string,
    ): Promise<Sample> => {
      const config: AgentConfig = structuredClone(base);
      config.Cluster.Version = version;
      const t0 = performance.now();
      await provisioner.provision(target, config, ctx);
      await provisioner.stage(target, config, ctx);
      const provisionMs = performance.now() - t0;
      runner.count = 0;
      runner.counting = true;
      const down0 = performance.now();
      await machines.stop(source);
      await machines.start(target);
      await machines.startServices(target);
      await machines.verify(target);
      const downMs = performance.now() - down0;
      runner.counting = false;
      const commandsDown = runner.count;
      await commitAndCleanUp(source, target, config);
      const wholeMs = performance.now() - t0;
      await engine.refreshNode(); // the engine sees the node as the measured ordering left it
      return { downMs, commandsDown, wholeMs, provisionMs };
    };

    // After the down window, both orderings commit and clean up alike.
    async function commitAndCleanUp(
      source: MachineName,
      target: MachineName,
      config: AgentConfig,
    ): Promise<void> {
      await applied.write(target, config);
      await writeNodeState(stateDir, target, new Date());
      await machines.remove(source);
      await provisioner.removeMachineFiles(source);
      await applied.remove(source);
      await machines.daemonReload();
    }

    const join = await engine.update({ wait: true, requestedBy: 'bench' });
    if (join.state !== 'succeeded') throw new Error(`join: ${JSON.stringify(join.error)}`);

    // Interleaved rounds, each to a version not seen before (so both download the kube
    // binaries afresh; the rootfs image and the other artifacts come from the cache in both).
    const ours: Sample[] = [];
    const upstream: Sample[] = [];
    const direct: Sample[] = [];
    let minor = 35;
    for (let i = 0; i < ROUNDS; i++) {
      ours.push(await agentdUpdate(`1.${minor++}.0`)); // kube1 → kube2
      upstream.push(await upstreamUpdate('kube2', 'kube1', `1.${minor++}.0`)); // kube2 → kube1
      direct.push(await directUpdate('kube1', 'kube2', `1.${minor++}.0`)); // kube1 → kube2
      upstream.push(await upstreamUpdate('kube2', 'kube1', `1.${minor++}.0`)); // back to kube1
    }

    const row = (name: string, s: Sample[]): (string | number)[] => [
      name,
      median(s.map((x) => x.downMs)),
      median(s.map((x) => x.commandsDown)),
      s[0]?.provisionMs === null ? '(in the engine)' : median(s.map((x) => x.provisionMs ?? 0)).toFixed(0),
      median(s.map((x) => x.wholeMs)),
    ];
    const downRatio = median(ours.map((x) => x.downMs)) / median(upstream.map((x) => x.downMs));
    console.log(
      `Switch-over on the simulated host, ${LATENCY_MS} ms per host command on both machines, ` +
        `machine poll interval ${SIM_TIMEOUTS.pollIntervalMs} ms, medians of ${ROUNDS} rounds (interleaved; upstream runs twice per round)\n`,
    );
    console.log(
      renderTable(
        [
          'order',
          'down window ms',
          'host commands in the down window',
          'provision + stage ms',
          'whole update ms',
        ],
        [
          row('agentd (provision, stage; stop, start, verify)', ours),
          row('agentd order, machine steps only (no engine)', direct),
          row('upstream (stop; provision, stage, start, verify)', upstream),
        ],
      ),
    );
    console.log(`\nratio down window agentd / upstream: ${downRatio.toFixed(3)}`);
    console.log(
      `per round (down ms / commands): agentd ${ours.map((s) => `${s.downMs.toFixed(0)}/${s.commandsDown}`).join(', ')}; ` +
        `machine steps only ${direct.map((s) => `${s.downMs.toFixed(0)}/${s.commandsDown}`).join(', ')}; ` +
        `upstream ${upstream.map((s) => `${s.downMs.toFixed(0)}/${s.commandsDown}`).join(', ')}`,
    );
    console.log(`host commands in all: ${runner.total}`);
    await engine.shutdown(1000);
  } finally {
    await mirror.close();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
