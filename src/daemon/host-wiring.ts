/**
 * How host commands run: for real (`--host systemd`: execa), or against the simulated host
 * (`--host sim`). `--sim` also starts the local artifact mirror and provides the default
 * config that joins a fresh node from it. The simulated host and the mirror are loaded only
 * then (sim-wiring.ts, a dynamic import): a production start never loads them.
 */
import type { DaemonConfig } from '../config/daemon-config.js';
import { createExecaRunner } from '../host/execa-runner.js';
import { createMachineManager } from '../host/machines.js';
import { createHostPaths } from '../host/paths.js';
import type { Host, HostWiringDeps } from './host.js';

export type { Host, HostWiringDeps } from './host.js';

export async function createHost(config: DaemonConfig, deps: HostWiringDeps): Promise<Host> {
  const paths = createHostPaths(config.root);
  const logger = deps.logger.child({ component: 'host' });
  if (config.host === 'sim') {
    const { createSimWiring } = await import('./sim-wiring.js');
    return createSimWiring(config, { ...deps, logger }, paths);
  }
  const execa = createExecaRunner({ logger });
  const runner = deps.wrapRunner?.(execa) ?? execa;
  const machines = createMachineManager({
    runner,
    paths,
    clock: deps.clock,
    logger,
    timeouts: { startMs: config.machineStartTimeoutMs, verifyMs: config.verifyTimeoutMs },
  });
  return { runner, machines, defaultConfig: null, close: async () => undefined };
}
