/**
 * The persisted model of the simulated host: `<root>/var/lib/agentd-sim/state.json`, shared by
 * every process that simulates commands on the same root (the daemon and the `src/sim/bin`
 * executables). Each command reads it, changes it and writes it back under a lock.
 */
import { mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { PreconditionFailedError, TimeoutError } from '../../errors.js';
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

/** Serializes writers within this process, per state file. */
const inProcessTails = new Map<string, Promise<void>>();

/** How long to wait for another process's lock before giving up. */
const LOCK_WAIT_MS = 15_000;
/** A lock older than this whose holder we cannot check is considered abandoned. */
const LOCK_STALE_MS = 30_000;

/**
 * Run `fn` while holding the state lock of `file`: an in-process queue (so concurrent commands
 * of one SimHost, or of two on the same root, do not interleave their read-modify-write), then
 * an exclusive lock file for other processes.
 */
export async function withSimStateLock<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const previous = inProcessTails.get(file) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tailPromise = previous.then(() => mine);
  inProcessTails.set(file, tailPromise);
  await previous;
  try {
    return await withLockFile(`${file}.lock`, fn);
  } finally {
    release();
    if (inProcessTails.get(file) === tailPromise) inProcessTails.delete(file);
  }
}

async function withLockFile<T>(lockFile: string, fn: () => Promise<T>): Promise<T> {
  await acquireLockFile(lockFile);
  try {
    return await fn();
  } finally {
    await rm(lockFile, { force: true });
  }
}

async function acquireLockFile(lockFile: string): Promise<void> {
  // Real time on purpose: this waits for another OS process, which an injected clock cannot advance.
  const started = Date.now();
  await mkdir(path.dirname(lockFile), { recursive: true });
  for (let attempt = 0; ; attempt++) {
    try {
      const handle = await open(lockFile, 'wx');
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (await isAbandoned(lockFile)) {
      await rm(lockFile, { force: true });
      continue;
    }
    if (Date.now() - started > LOCK_WAIT_MS) {
      throw new TimeoutError(`sim: wait for the state lock ${lockFile}`, LOCK_WAIT_MS);
    }
    await delay(Math.min(5 + attempt * 2, 50));
  }
}

// A lock is abandoned when its holder process is gone, or when it is too old to be a live command.
async function isAbandoned(lockFile: string): Promise<boolean> {
  try {
    const pid = Number((await readFile(lockFile, 'utf8')).trim());
    if (Number.isInteger(pid) && pid > 0) {
      if (pid === process.pid) return false;
      try {
        process.kill(pid, 0);
        return false;
      } catch (err) {
        return (err as NodeJS.ErrnoException).code === 'ESRCH';
      }
    }
    const info = await stat(lockFile);
    return Date.now() - info.mtimeMs > LOCK_STALE_MS;
  } catch (err) {
    // The holder released it between our open and our read: try again at once.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
}
