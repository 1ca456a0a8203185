/**
 * The state files read as claims, checked against the host before an update acts on them
 * (docs/architecture.md, "Recovery checks"). An update provisions over the machine that is not
 * the active one: when node.json names the wrong machine, that would be the one that serves.
 */
import { StateConflictError } from '../errors.js';
import type { MachineManager } from '../host/machines.js';
import { MACHINE_NAMES, type MachineName } from '../host/types.js';
import type { AppliedConfigStore } from './applied-config-store.js';
import {
  checkStateFiles,
  observeHost,
  type AppliedState,
  type Disagreement,
  type StateClaims,
} from './host-truth.js';
import { readJournal } from './journal.js';
import { readNodeState } from './node-state.js';
import type { StateReserve } from './reserve.js';
import type { StatusWarning } from './warnings.js';

export type StateConflictWarning = Extract<StatusWarning, { code: 'state-conflict' }>;

/**
 * What agentd does while `file` disagrees with the host or another file: every update is
 * refused (`refuseOnDisagreement`), and no machine that serves is stopped or removed on it.
 */
export function conflictAction(file: string): string {
  return `agentd refuses every update (STATE_CONFLICT) and stops or removes no machine that serves on its word; move ${file} aside (docs/operations.md, "A corrupt state file") and agentd decides from the host`;
}

/** The `status` warning of a disagreement, saying what agentd did (default: `conflictAction`). */
export function conflictWarning(d: Disagreement, action = conflictAction(d.file)): StateConflictWarning {
  return {
    code: 'state-conflict',
    message: `${d.message}: ${action}`,
    file: d.file,
    against: d.against,
    machine: d.serving,
    action,
  };
}

/** What the state files claim; a file that cannot be read claims nothing (its own error is reported where it is read). */
export async function readClaims(stateDir: string, applied: AppliedConfigStore): Promise<StateClaims> {
  const appliedStates = {} as Record<MachineName, AppliedState>;
  for (const m of MACHINE_NAMES) {
    try {
      const rec = await applied.read(m);
      appliedStates[m] = rec === null ? 'missing' : rec.verified ? 'verified' : 'unverified';
    } catch {
      appliedStates[m] = 'unreadable';
    }
  }
  const nodeActive = await readNodeState(stateDir).then(
    (n) => (n === undefined ? undefined : n.activeMachine),
    () => undefined,
  );
  const journal = await readJournal(stateDir).catch(() => null);
  return { nodeActive, journal, applied: appliedStates };
}

/**
 * Refuse with STATE_CONFLICT, naming the file and what the host shows, when the state files
 * disagree with the host or with each other.
 */
export async function refuseOnDisagreement(
  d: {
    stateDir: string;
    machines: Pick<MachineManager, 'inspect'>;
    reserve?: StateReserve;
    onDisk?: (m: MachineName) => Promise<boolean>;
  },
  applied: AppliedConfigStore,
): Promise<void> {
  const claims = await readClaims(d.stateDir, applied);
  const facts = await observeHost(d.machines, { onDisk: d.onDisk, reserve: d.reserve });
  const found = checkStateFiles(claims, facts);
  const first = found[0];
  if (first === undefined) return;
  throw new StateConflictError(
    `${found.map((f) => f.message).join('; ')}; agentd acts on no machine while its files disagree with the host: move ${first.file} aside (docs/operations.md, "A corrupt state file") and agentd decides from the host`,
    {
      data: {
        file: first.file,
        host: Object.fromEntries(
          MACHINE_NAMES.map((m) => [
            m,
            facts[m].serving
              ? 'serving'
              : facts[m].running
                ? 'running'
                : facts[m].exists
                  ? 'stopped'
                  : 'absent',
          ]),
        ),
        disagreements: found,
      },
    },
  );
}
