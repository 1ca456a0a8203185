/**
 * The simulated host (`--host sim`, tests): a `CommandRunner` that accepts exactly the host
 * commands agentd issues and plays them against a model of systemd machines persisted under
 * the root, so the daemon and the sim executables see one host.
 */
import type { Logger } from 'pino';
import { commandFailpoint } from '../../host/failpoints.js';
import { CancelledError, CommandFailedError, TimeoutError } from '../../errors.js';
import { systemClock } from '../../host/clock.js';
import { createHostPaths } from '../../host/paths.js';
import { MACHINE_NAMES } from '../../host/types.js';
import type { Clock, CommandResult, CommandRunner, MachineName, RunOptions } from '../../host/types.js';
import { simLatencyMs } from '../faults.js';
import type { SimFault } from '../faults.js';
import { commandMachine, formatCommandLine, parseSimCommand } from './command-line.js';
import { applySimCommand, crashSimMachine, settleSimState } from './model.js';
import type { SimModelContext, SimOutcome } from './model.js';
import { isUnitEnabled, pathExists } from './rootfs.js';
import { withSimStateLock } from './state-lock.js';
import { readSimState, SIM_UNITS, simStateFile, writeSimState } from './state.js';
import type { SimPersistedState, SimRegistration, SimUnitActiveState, SimUnitName } from './state.js';

export interface SimHostOptions {
  /** The `--root` the model lives under (machines, nspawn files and the sim state). */
  root: string;
  /** Injected faults (see `parseSimFaults`). */
  faults?: readonly SimFault[];
  /** Clock on which latency faults elapse (default: the system clock). */
  clock?: Clock;
  logger?: Logger;
}

/** A unit inside a simulated machine. */
export interface SimUnitSnapshot {
  /** Enabled in the machine's rootfs (multi-user.target.wants). */
  enabled: boolean;
  active: SimUnitActiveState;
  /** Why the unit is not active, when the sim knows. */
  reason?: string;
}

/** One simulated machine as the host sees it. */
export interface SimMachineSnapshot {
  name: MachineName;
  /** `machinectl enable`d. */
  enabled: boolean;
  registration: SimRegistration;
  running: boolean;
  /** systemd-nspawn@<m>.service is failed. */
  serviceFailed: boolean;
  /** The rootfs directory exists. */
  imageExists: boolean;
  /** `/etc/systemd/nspawn/<m>.nspawn` exists. */
  nspawnFileExists: boolean;
  units: Record<SimUnitName, SimUnitSnapshot>;
}

/** Everything the simulated host knows, for tests and `status`. */
export interface SimState {
  /** How many `systemctl daemon-reload`s ran. */
  daemonReloads: number;
  machines: Record<MachineName, SimMachineSnapshot>;
}

/** A `CommandRunner` backed by the simulated host, plus what tests and `--sim` need to look inside. */
export interface SimHost extends CommandRunner {
  readonly root: string;
  /** The JSON file the model is persisted in. */
  readonly stateFile: string;
  /** The machine runs and its kubelet is active (the sim's answer to the kubelet health endpoint). */
  kubeletHealthy(m: MachineName): Promise<boolean>;
  snapshot(): Promise<SimState>;
  /**
   * Simulate a crash of machine `m`: its container dies but machined keeps the registration, so
   * the next `machinectl start` fails with "already exists" until it is terminated.
   */
  crashMachine(m: MachineName): Promise<void>;
}

/** The last `max` characters of `text` (errors keep the end, where the reason usually is). */
function tail(text: string, max = 2048): string {
  const trimmed = text.trimEnd();
  return trimmed.length <= max ? trimmed : `…${trimmed.slice(trimmed.length - max)}`;
}

/** Create a simulated host on `options.root`. */
export function createSimHost(options: SimHostOptions): SimHost {
  const paths = createHostPaths(options.root);
  const stateFile = simStateFile(paths.root);
  const clock = options.clock ?? systemClock;
  // No default logger on purpose: the sim executables start once per command and pino costs startup time.
  const logger = options.logger;
  const faults = options.faults ?? [];
  const ctx: SimModelContext = { paths, faults };

  // One read-modify-write of the shared state, under its lock.
  async function transact<T>(fn: (state: SimPersistedState) => Promise<T>): Promise<T> {
    return withSimStateLock(stateFile, async () => {
      const state = await readSimState(stateFile);
      const before = JSON.stringify(state);
      const out = await fn(state);
      if (JSON.stringify(state) !== before) await writeSimState(stateFile, state);
      return out;
    });
  }

  // Latency faults elapse on the injected clock, honouring the caller's timeout and signal.
  async function delay(command: string, ms: number, runOptions: RunOptions): Promise<void> {
    const { timeoutMs, signal } = runOptions;
    const timesOut = timeoutMs !== undefined && timeoutMs > 0 && ms >= timeoutMs;
    try {
      await clock.sleep(timesOut ? timeoutMs : ms, signal);
    } catch (err) {
      throw new CancelledError(command, { cause: err });
    }
    if (timesOut) throw new TimeoutError(command, timeoutMs, { data: { command } });
  }

  async function run(
    file: string,
    args: readonly string[],
    runOptions: RunOptions = {},
  ): Promise<CommandResult> {
    const started = clock.now();
    const command = formatCommandLine(file, args);
    const cmd = parseSimCommand(file, args);
    if (!cmd) {
      throw new CommandFailedError(command, 1, `sim: unsupported command: ${command}`);
    }
    if (runOptions.signal?.aborted) throw new CancelledError(command, { cause: runOptions.signal.reason });
    commandFailpoint(command);
    const machine = commandMachine(cmd);
    const latency = machine ? simLatencyMs(ctx.faults, machine) : 0;
    if (latency > 0) await delay(command, latency, runOptions);
    const outcome: SimOutcome = await transact(async (state) => {
      await settleSimState(ctx, state);
      return applySimCommand(ctx, state, cmd);
    });
    const result: CommandResult = { command, ...outcome, durationMs: clock.now() - started };
    logger?.debug(
      { command, exitCode: result.exitCode, durationMs: result.durationMs, stderr: tail(result.stderr, 512) },
      `sim host command ${command} exited ${result.exitCode}`,
    );
    if (result.exitCode !== 0 && runOptions.reject !== false) {
      throw new CommandFailedError(command, result.exitCode, tail(result.stderr));
    }
    return result;
  }

  async function snapshot(): Promise<SimState> {
    const state = await readSimState(stateFile);
    const machines = {} as Record<MachineName, SimMachineSnapshot>;
    for (const m of MACHINE_NAMES) {
      const rec = state.machines[m];
      const rootfs = paths.machineDir(m);
      const units = {} as Record<SimUnitName, SimUnitSnapshot>;
      for (const u of SIM_UNITS) {
        units[u] = { enabled: await isUnitEnabled(rootfs, u), ...rec.units[u] };
      }
      machines[m] = {
        name: m,
        enabled: rec.enabled,
        registration: rec.registration,
        running: rec.registration === 'running',
        serviceFailed: rec.serviceFailed,
        imageExists: await pathExists(rootfs),
        nspawnFileExists: await pathExists(paths.nspawnFile(m)),
        units,
      };
    }
    return { daemonReloads: state.daemonReloads, machines };
  }

  return {
    root: paths.root,
    stateFile,
    run,
    snapshot,
    async kubeletHealthy(m: MachineName): Promise<boolean> {
      const rec = (await readSimState(stateFile)).machines[m];
      return rec.registration === 'running' && rec.units['kubelet.service'].active === 'active';
    },
    async crashMachine(m: MachineName): Promise<void> {
      await transact(async (state) => crashSimMachine(state, m));
    },
  };
}
