/**
 * The persisted model of the simulated host: `<root>/var/lib/agentd-sim/state.json`, shared by
 * every process that simulates commands on the same root (the daemon and the `src/sim/bin`
 * executables). Each command reads it, changes it and writes it back under the lock of
 * `state-lock.ts`.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { PreconditionFailedError } from '../../errors.js';
import { writeFileAtomic } from '../../host/fs-atomic.js';
import { MACHINE_NAMES } from '../../host/types.js';
import type { MachineName } from '../../host/types.js';

/** The units agentd manages inside a machine. */
export const SIM_UNITS = ['containerd.service', 'kubelet.service'] as const;
export type SimUnitName = (typeof SIM_UNITS)[number];

/** `systemctl is-active` words the sim can answer. */
export type SimUnitActiveState = 'inactive' | 'activating' | 'active' | 'failed';

/**
 * machined's view of a machine: `none` (not registered, `machinectl show` fails), `running`
 * (booted, answers `systemd-run`), or `stale` (registered but its container is gone, e.g. after
 * a crash: `machinectl start` then fails with "already exists").
 */
export type SimRegistration = 'none' | 'running' | 'stale';

/** A unit inside a machine, as persisted. */
export interface SimUnitRecord {
  active: SimUnitActiveState;
  /** Why the unit is not active, for tests and logs. */
  reason?: string;
}

/** A machine, as persisted. */
export interface SimMachineRecord {
  /** `machinectl enable`d: systemd-nspawn@<m>.service is wanted by machines.target. */
  enabled: boolean;
  registration: SimRegistration;
  /** systemd-nspawn@<m>.service is in the failed state (cleared by `systemctl reset-failed`). */
  serviceFailed: boolean;
  /**
   * Started, but D-Bus inside has not answered anyone yet: real systemd refuses the first
   * `systemd-run --machine` after `machinectl start` with "Failed to connect to bus: No such
   * file or directory" until the machine's bus is up. Absent in older state files (= false).
   */
  booting?: boolean;
  /**
   * Booted into agentd's standby target (its `.nspawn` file said so): containerd and kubelet stay
   * off until `systemctl start default.target`. Absent in older state files (= false).
   */
  standby?: boolean;
  units: Record<SimUnitName, SimUnitRecord>;
}

/** The JSON document in state.json. */
export interface SimPersistedState {
  version: 1;
  daemonReloads: number;
  machines: Record<MachineName, SimMachineRecord>;
}

const ACTIVE_STATES: readonly unknown[] = ['inactive', 'activating', 'active', 'failed'];
const REGISTRATIONS: readonly unknown[] = ['none', 'running', 'stale'];

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The problems that keep `value` from being a `SimPersistedState` (empty when it is one).
 * Hand-written rather than zod: each sim executable is a fresh process, and zod's import
 * alone would double its start-up time.
 */
function stateProblems(value: unknown): string[] {
  if (!isObject(value)) return ['not an object'];
  const problems: string[] = [];
  if (value.version !== 1) problems.push(`version: expected 1, got ${JSON.stringify(value.version)}`);
  if (!Number.isInteger(value.daemonReloads) || (value.daemonReloads as number) < 0) {
    problems.push('daemonReloads: expected a non-negative integer');
  }
  const machines = value.machines;
  if (!isObject(machines)) return [...problems, 'machines: expected an object'];
  for (const m of MACHINE_NAMES) {
    const rec = machines[m];
    if (!isObject(rec)) {
      problems.push(`machines.${m}: expected an object`);
      continue;
    }
    if (typeof rec.enabled !== 'boolean') problems.push(`machines.${m}.enabled: expected a boolean`);
    if (typeof rec.serviceFailed !== 'boolean')
      problems.push(`machines.${m}.serviceFailed: expected a boolean`);
    if (!REGISTRATIONS.includes(rec.registration)) {
      problems.push(`machines.${m}.registration: expected none, running or stale`);
    }
    const units = rec.units;
    for (const u of SIM_UNITS) {
      const unit = isObject(units) ? units[u] : undefined;
      if (!isObject(unit) || !ACTIVE_STATES.includes(unit.active)) {
        problems.push(`machines.${m}.units.${u}.active: expected inactive, activating, active or failed`);
      } else if (unit.reason !== undefined && typeof unit.reason !== 'string') {
        problems.push(`machines.${m}.units.${u}.reason: expected a string`);
      }
    }
  }
  return problems;
}

function emptyMachine(): SimMachineRecord {
  return {
    enabled: false,
    registration: 'none',
    serviceFailed: false,
    units: { 'containerd.service': { active: 'inactive' }, 'kubelet.service': { active: 'inactive' } },
  };
}

/** The state of a host on which nothing has happened yet. */
export function emptySimState(): SimPersistedState {
  const machines = Object.fromEntries(MACHINE_NAMES.map((m) => [m, emptyMachine()])) as Record<
    MachineName,
    SimMachineRecord
  >;
  return { version: 1, daemonReloads: 0, machines };
}

/** Where the sim keeps its state under `root`. */
export function simStateFile(root: string): string {
  return path.join(path.resolve(root), 'var/lib/agentd-sim/state.json');
}

/** Read the state (an absent file is an empty host). */
export async function readSimState(file: string): Promise<SimPersistedState> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return emptySimState();
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new PreconditionFailedError(`sim state ${file} is not valid JSON; delete it to start over`, {
      cause: err,
    });
  }
  const problems = stateProblems(parsed);
  if (problems.length > 0) {
    throw new PreconditionFailedError(
      `sim state ${file} does not match the expected shape (${problems.join('; ')}); delete it to start over`,
    );
  }
  return parsed as SimPersistedState;
}

/** Write the state atomically (temp file, fsync, rename). */
export async function writeSimState(file: string, state: SimPersistedState): Promise<void> {
  await writeFileAtomic(file, `${JSON.stringify(state, null, 2)}\n`);
}
