/**
 * How host commands run: for real (`--host systemd`: execa), or against the simulated host
 * (`--host sim`). `--sim` also starts the local artifact mirror and provides the default
 * config that joins a fresh node from it. The simulated host and the mirror are loaded only
 * then (sim-wiring.ts, a dynamic import): a production start never loads them.
 */
import type { DaemonConfig } from '../config/daemon-config.js';
import { createExecaRunner } from '../host/execa-runner.js';
import { createMachineBus } from '../host/machine-bus.js';
import { createMachineManager } from '../host/machines.js';
import { createHostPaths } from '../host/paths.js';
import { readMemAvailable } from '../host/memory.js';
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
  // The node check asks machined and the machines' systemd over D-Bus, and runs the commands
  // only when that cannot answer (a host with no reachable bus: every test root).
  const bus = createMachineBus({ paths, clock: deps.clock, logger });
  const machines = createMachineManager({
    runner,
    paths,
    clock: deps.clock,
    logger,
    bus,
    timeouts: { startMs: config.machineStartTimeoutMs, verifyMs: config.verifyTimeoutMs },
  });
  return {
    runner,
    machines,
    memAvailable: () => readMemAvailable(),
    defaultConfig: null,
    close: async () => {
      bus.close();
    },
  };
}
