/**
 * Fault injection for the simulated host: `AGENTD_SIM_FAULTS`, a comma list of
 * `<fault>:<machine>` (docs/architecture.md), so rollback and recovery can be exercised.
 */
import { InvalidConfigError } from '../errors.js';
import { MACHINE_NAMES } from '../host/types.js';
import type { MachineName } from '../host/types.js';

/** The machine a fault applies to: one slot, or `*` for both. */
export type SimFaultTarget = MachineName | '*';

/** One injected fault of the simulated host. */
export type SimFault =
  /** `machinectl start` of the machine fails. */
  | { kind: 'start-fails'; machine: SimFaultTarget }
  /** kubelet in the machine never becomes active (it crash-loops). */
  | { kind: 'kubelet-inactive'; machine: SimFaultTarget }
  /**
   * The host has too little available memory for a machine in standby (64 MiB); the machine part
   * is `*` (memory is the host's).
   */
  | { kind: 'low-memory'; machine: '*' }
  /** Every host command on the machine takes `ms` longer (on the sim's clock). */
  | { kind: 'latency'; machine: SimFaultTarget; ms: number };

const EXPECTED_FAULTS = 'start-fails, kubelet-inactive, low-memory or latency=<ms>';
const EXPECTED_MACHINES = `${MACHINE_NAMES.join(', ')} or *`;

/**
 * Parse an `AGENTD_SIM_FAULTS` value such as `start-fails:kube2,latency=200:*`.
 * Empty input (or empty list items) means no faults; anything else that does not parse throws
 * `InvalidConfigError` naming the entry and what was expected.
 */
export function parseSimFaults(spec: string): SimFault[] {
  const faults: SimFault[] = [];
  for (const raw of spec.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    faults.push(parseEntry(entry));
  }
  return faults;
}

function parseEntry(entry: string): SimFault {
  const bad = (what: string): InvalidConfigError =>
    new InvalidConfigError(`AGENTD_SIM_FAULTS entry ${JSON.stringify(entry)}: ${what}`, {
      data: { option: 'AGENTD_SIM_FAULTS', entry },
    });
  const parts = entry.split(':');
  if (parts.length !== 2) {
    throw bad(`expected <fault>:<machine> with fault ${EXPECTED_FAULTS} and machine ${EXPECTED_MACHINES}`);
  }
  const [fault = '', target = ''] = parts.map((p) => p.trim());
  if (target !== '*' && !(MACHINE_NAMES as readonly string[]).includes(target)) {
    throw bad(`machine must be ${EXPECTED_MACHINES}, got ${JSON.stringify(target)}`);
  }
  const machine = target as SimFaultTarget;
  if (fault === 'start-fails' || fault === 'kubelet-inactive') return { kind: fault, machine };
  if (fault === 'low-memory') {
    if (machine !== '*')
      throw bad(`low-memory applies to the host: write low-memory:*, got ${JSON.stringify(entry)}`);
    return { kind: fault, machine };
  }
  const latency = /^latency=(.*)$/.exec(fault);
  if (latency) {
    const value = latency[1] ?? '';
    if (!/^\d+$/.test(value)) {
      throw bad(
        `latency must be a whole number of milliseconds (latency=<ms>), got ${JSON.stringify(value)}`,
      );
    }
    return { kind: 'latency', machine, ms: Number(value) };
  }
  throw bad(`unknown fault ${JSON.stringify(fault)}; expected ${EXPECTED_FAULTS}`);
}

/** Whether a fault of `kind` applies to machine `m`. */
export function hasSimFault(faults: readonly SimFault[], kind: SimFault['kind'], m: MachineName): boolean {
  return faults.some((f) => f.kind === kind && (f.machine === '*' || f.machine === m));
}

/** The simulated host's MemAvailable: 64 MiB with `low-memory:*`, else 16 GiB. */
export function simMemAvailable(faults: readonly SimFault[]): number {
  return faults.some((f) => f.kind === 'low-memory') ? 64 * 1024 ** 2 : 16 * 1024 ** 3;
}

/** The injected latency of commands on machine `m` (the largest that applies; 0 when none). */
export function simLatencyMs(faults: readonly SimFault[], m: MachineName): number {
  let ms = 0;
  for (const f of faults) {
    if (f.kind === 'latency' && (f.machine === '*' || f.machine === m)) ms = Math.max(ms, f.ms);
  }
  return ms;
}
