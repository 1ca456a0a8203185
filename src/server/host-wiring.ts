/**
 * How host commands run: for real (`--host systemd`: execa), or against the simulated host
 * (`--host sim`). `--sim` also starts the local artifact mirror the sim default config uses.
 */
import type { Logger } from 'pino';
import type { DaemonConfig } from '../config/daemon-config.js';
import { createExecaRunner } from '../host/execa-runner.js';
import { createMachineManager, type MachineManager } from '../host/machines.js';
import { createHostPaths } from '../host/paths.js';
import type { Clock, CommandRunner } from '../host/types.js';
import { parseSimFaults } from '../sim/faults.js';
import { createSimHost } from '../sim/host/index.js';

export interface Host {
  runner: CommandRunner;
  machines: MachineManager;
  /** Base URL of the local artifact mirror (`--sim` only). */
  mirrorUrl: string | null;
  close(): Promise<void>;
}

export interface HostWiringDeps {
  logger: Logger;
  clock: Clock;
  env: NodeJS.ProcessEnv;
}

export async function createHost(config: DaemonConfig, deps: HostWiringDeps): Promise<Host> {
  const paths = createHostPaths(config.root);
  const logger = deps.logger.child({ component: 'host' });
  if (config.host === 'sim') {
    const faults = deps.env.AGENTD_SIM_FAULTS ? parseSimFaults(deps.env.AGENTD_SIM_FAULTS) : [];
    const sim = createSimHost({ root: config.root, faults, clock: deps.clock, logger });
    const machines = createMachineManager({
      runner: sim,
      paths,
      clock: deps.clock,
      logger,
      kubeletHealth: (m) => sim.kubeletHealthy(m),
      // The simulated host answers at once: poll it tightly so a try-out update takes seconds.
      timeouts: { pollIntervalMs: 50 },
    });
    return { runner: sim, machines, mirrorUrl: null, close: async () => undefined };
  }
  const runner = createExecaRunner({ logger });
  const machines = createMachineManager({ runner, paths, clock: deps.clock, logger });
  return { runner, machines, mirrorUrl: null, close: async () => undefined };
}
