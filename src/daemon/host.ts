/** What the host wiring gives the daemon: how commands run, the machine manager, the sim's default config. */
import type { Logger } from 'pino';
import type { AgentConfig } from '../config/agent-config.js';
import type { MachineManager } from '../host/machines.js';
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
  /**
   * Decorate the command runner the machine manager uses (tests that observe or freeze what the
   * simulated host is asked to do, e.g. the fleet simulation). Default: the runner as is.
   */
  wrapRunner?: (runner: CommandRunner) => CommandRunner;
}
