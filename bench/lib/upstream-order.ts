/**
 * The upstream agent's switch-over order with agentd's own pieces: stop the source machine
 * first, then provision, stage, start and verify the target. The down window runs from the
 * stop's start to the verify's end. Shared by the simulated-host and the real-host benchmarks.
 */
import type { AgentConfig } from '../../src/config/agent-config.js';
import type { TaskContext } from '../../src/tasks/tasks.js';
import type { MachineManager } from '../../src/host/machines.js';
import type { MachineName } from '../../src/host/types.js';
import type { Provisioner } from '../../src/provision/provisioner-contract.js';

export interface UpstreamSwitch {
  downMs: number;
  /** Provision + stage of the target, inside the down window. */
  provisionMs: number;
}

export async function upstreamSwitch(
  pieces: { machines: MachineManager; provisioner: Provisioner; ctx: TaskContext },
  source: MachineName,
  target: MachineName,
  config: AgentConfig,
): Promise<UpstreamSwitch> {
  const { machines, provisioner, ctx } = pieces;
  const t0 = performance.now();
  await machines.stop(source);
  const p0 = performance.now();
  await provisioner.provision(target, config, ctx);
  await provisioner.stage(target, config, ctx);
  const provisionMs = performance.now() - p0;
  await machines.start(target);
  await machines.startServices(target);
  await machines.verify(target);
  return { downMs: performance.now() - t0, provisionMs };
}
