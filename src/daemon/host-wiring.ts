/**
 * How host commands run: for real (`--host systemd`: execa), or against the simulated host
 * (`--host sim`). `--sim` also starts the local artifact mirror and provides the default
 * config that joins a fresh node from it. The simulated host and the mirror are loaded only
 * then (sim-wiring.ts, a dynamic import): a production start never loads them.
 */
import type { Logger } from 'pino';
import type { DaemonConfig } from '../config/daemon-config.js';
import type { AgentConfig } from '../config/agent-config.js';
import { createExecaRunner } from '../host/execa-runner.js';
import { createMachineManager, type MachineManager } from '../host/machines.js';
import { createHostPaths } from '../host/paths.js';
import type { Clock, CommandRunner } from '../host/types.js';

export interface Host {
  runner: CommandRunner;
  machines: MachineManager;
  /** The config a fresh node joins with when `update` gets none (`--sim` only). */
  defaultConfig: (() => AgentConfig) | null;
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
    const { createSimWiring } = await import('./sim-wiring.js');
    return createSimWiring(config, { ...deps, logger }, paths);
  }
  const runner = createExecaRunner({ logger });
  const machines = createMachineManager({ runner, paths, clock: deps.clock, logger });
  return { runner, machines, defaultConfig: null, close: async () => undefined };
}
