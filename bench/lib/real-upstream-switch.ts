/**
 * The upstream agent's switch-over order, run INSIDE a real systemd host by
 * `bench/real-down-window.ts` (through `nsenter`, with the repository bound at /repo): stop the
 * source machine first, then provision, stage, start and verify the target — with agentd's own
 * production pieces (the execa runner against real systemd, the machine manager, the
 * provisioner), so the only difference from agentd's order is the order. Then it commits and
 * cleans up the way agentd does, so the daemon can go on from the node it leaves.
 *
 * usage: node --import tsx bench/lib/real-upstream-switch.ts SOURCE TARGET VERSION
 * Prints one JSON line: {"downMs": …, "provisionMs": …}.
 */
import pino from 'pino';
import { createAppliedConfigStore } from '../../src/engine/applied-config-store.js';
import { writeNodeState } from '../../src/engine/node-state.js';
import type { TaskContext } from '../../src/tasks/tasks.js';
import { systemClock } from '../../src/host/clock.js';
import { createExecaRunner } from '../../src/host/execa-runner.js';
import { createMachineManager } from '../../src/host/machines.js';
import { createHostPaths } from '../../src/host/paths.js';
import type { MachineName } from '../../src/host/types.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { createProvisioner } from '../../src/provision/provisioner.js';
import { upstreamSwitch } from './upstream-order.js';

const [source, target, version] = process.argv.slice(2) as [MachineName, MachineName, string];
const STATE_DIR = '/var/lib/agentd'; // agentd's own: the same artifact and blob caches

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' });
  const paths = createHostPaths('/');
  const clock = systemClock;
  const machines = createMachineManager({ runner: createExecaRunner({ logger }), paths, clock, logger });
  const metrics = createMetrics({ version: 'bench', collectDefaults: false });
  const provisioner = createProvisioner({
    paths,
    stateDir: STATE_DIR,
    clock,
    logger,
    metrics,
    daemonReload: () => machines.daemonReload(),
  });
  const applied = createAppliedConfigStore(paths, logger);
  const current = await applied.read(source);
  if (!current) throw new Error(`no applied config for ${source}`);
  const config = structuredClone(current.config);
  config.Cluster.Version = version;
  const ctx: TaskContext = {
    signal: new AbortController().signal,
    logger,
    progress: () => undefined,
    metrics,
  };

  const { downMs, provisionMs } = await upstreamSwitch(
    { machines, provisioner, ctx },
    source,
    target,
    config,
  );

  await applied.write(target, config);
  await writeNodeState(STATE_DIR, target, new Date());
  await machines.remove(source);
  await provisioner.removeMachineFiles(source);
  await applied.remove(source);
  await machines.daemonReload();
  process.stdout.write(`${JSON.stringify({ downMs, provisionMs })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
