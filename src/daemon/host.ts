/** What the host wiring gives the daemon: how commands run, the machine manager, the sim's default config. */
import type { Logger } from 'pino';
import type { AgentConfig } from '../config/agent-config.js';
import type { MachineManager } from '../host/machines.js';
import type { Clock, CommandRunner } from '../host/types.js';
import type { CleanupStack } from './cleanup-stack.js';

export interface Host {
  runner: CommandRunner;
  machines: MachineManager;
  /** The host's available memory in bytes (the standby check), or null when it cannot say. */
  memAvailable(): Promise<number | null>;
  /** The config a fresh node joins with when `update` gets none (`--sim` only). */
  defaultConfig: (() => AgentConfig) | null;
  close(): Promise<void>;
}

export interface HostWiringDeps {
  logger: Logger;
  clock: Clock;
  env: NodeJS.ProcessEnv;
  /**
   * The daemon's clean-up stack: a part the wiring brings up (the sim mirror) pushes the step
   * that takes it down as soon as it is up, so a step of the wiring that fails after it cannot
   * leave it running.
   */
  cleanup: Pick<CleanupStack, 'push'>;
  /**
   * Decorate the command runner the machine manager uses (tests that observe or freeze what the
   * simulated host is asked to do, e.g. the fleet simulation). Default: the runner as is.
   */
  wrapRunner?: (runner: CommandRunner) => CommandRunner;
}
