/**
 * Recovery of an interrupted switch-over (docs/architecture.md, "Recovery"): the journal says
 * which machine should serve — the committed target, else the source — and the host is checked
 * before anything is destroyed (docs/architecture.md, "Recovery checks"):
 *
 * - a machine the journal names that the host does not have (no registration, no rootfs, no
 *   applied config) is not brought up at the cost of the one that serves: that one is kept;
 * - the other machine is only stopped before the named one starts (two never run at once), and
 *   removed only once the named one runs and is verified;
 * - when the named machine does not come back, the other one, if it served, is started again.
 */
import type { Logger } from 'pino';
import { alternateMachine, type MachineName } from '../host/types.js';
import { observeHost, refuseDestroy, stopConfirmed, type HostFacts } from './host-truth.js';
import type { Journal } from './journal.js';
import type { MachineManager } from '../host/machines.js';
import type { AppliedConfigStore } from './applied-config-store.js';
import type { StateReserve } from './reserve.js';
import { failpoint } from '../host/failpoints.js';
import { conflictWarning, type StateConflictWarning } from './state-check.js';

/** One recovery step (a `RecoveryReport` action); `deferred`: not done now, left for agentd to finish once ready (the uncordon). */
export interface RecoveryAction {
  step: string;
  ok: boolean;
  error?: string;
  deferred?: boolean;
  /** Not done because the host disagreed with the journal (docs/architecture.md, "Recovery checks"). */
  refused?: boolean;
}

/** What the switch recovery needs of recovery's dependencies. */
export interface SwitchDeps {
  machines: MachineManager;
  applied: Pick<AppliedConfigStore, 'read'>;
  reserve?: StateReserve;
  onDisk?: (m: MachineName) => Promise<boolean>;
}

export interface SwitchTools {
  step(name: string, fn: () => Promise<void>): Promise<boolean>;
  /** Stop and remove a machine, its nspawn files and its applied config. */
  removeMachine(m: MachineName): Promise<void>;
  /** Start a machine and its services as needed, and verify it. */
  bringUp(m: MachineName): Promise<boolean>;
  actions: RecoveryAction[];
  log: Logger;
}

export interface SwitchRecovery {
  outcome: string;
  active: MachineName | null;
  ok: boolean;
  /** The journal disagreed with the host, and what recovery did about it (shown by `status`). */
  conflict?: StateConflictWarning;
}

async function hasAppliedConfig(d: SwitchDeps, m: MachineName): Promise<boolean> {
  try {
    return (await d.applied.read(m)) !== null;
  } catch {
    return true; // there, if unreadable
  }
}

export async function recoverSwitch(
  d: SwitchDeps,
  journal: Journal,
  t: SwitchTools,
): Promise<SwitchRecovery> {
  const committed = journal.committed && journal.target !== null;
  const winner = committed ? journal.target : journal.source;
  const loser = committed ? journal.source : journal.target;
  const facts = (): Promise<HostFacts> => observeHost(d.machines, { onDisk: d.onDisk, reserve: d.reserve });
  const removeGuarded = async (m: MachineName): Promise<void> => {
    const refused = refuseDestroy(m, await facts());
    if (refused !== null) {
      t.actions.push({ step: `remove ${m}`, ok: false, refused: true, error: `refused: ${refused}` });
      t.log.warn({ machine: m, reason: refused }, 'recovery refuses to remove a machine');
      return;
    }
    await t.removeMachine(m);
    await t.step('daemon-reload', () => d.machines.daemonReload());
  };

  if (winner === null) {
    // A join that had not committed: nothing served before it.
    if (loser) {
      await t.removeMachine(loser);
      await t.step('daemon-reload', () => d.machines.daemonReload());
    }
    return { outcome: 'removed the partial join; the node has no machine', active: null, ok: true };
  }

  const before = await facts();
  const role = committed ? 'committed target' : 'source';
  if (before[winner].known && !before[winner].exists && !(await hasAppliedConfig(d, winner))) {
    const why = `the open journal names ${winner} as the ${role}, but the host has no machine ${winner} and no applied config of it`;
    if (loser && before[loser].known && before[loser].serving) {
      // The journal disagrees with the host: act on what runs and is verified.
      t.actions.push({ step: `start ${winner}`, ok: false, refused: true, error: `refused: ${why}` });
      t.log.warn({ journal, keep: loser }, `${why}: keeping ${loser}, which serves`);
      const conflict = conflictWarning(
        { file: 'journal.json', against: 'host', serving: loser, message: why },
        `startup recovery kept ${loser}, which serves, and started, stopped or removed no machine`,
      );
      return { outcome: `kept ${loser}, which serves: ${why}`, active: loser, ok: true, conflict };
    }
    t.log.warn({ journal }, why);
  }

  // Two machines never run at once: the other one stops first, and is removed only once the
  // named one runs and is verified.
  if (loser && before[loser].running) {
    await t.step(`stop ${loser}`, () =>
      stopConfirmed(d.machines, loser, { onDisk: d.onDisk, reserve: d.reserve }),
    );
  }
  failpoint('recovery.switch.mid');
  const up = await t.bringUp(winner);
  if (up) {
    if (loser) await removeGuarded(loser);
    return {
      outcome: committed ? `completed the switch to ${winner}` : `rolled back to ${winner}`,
      active: winner,
      ok: true,
    };
  }
  const other = loser ?? alternateMachine(winner);
  if (loser && before[loser].known && before[loser].serving && (await t.bringUp(other))) {
    return {
      outcome: `could not bring ${winner} back; ${other} serves again, as before the restart`,
      active: other,
      ok: false,
    };
  }
  return {
    outcome: committed ? `could not complete the switch to ${winner}` : `could not bring ${winner} back`,
    active: winner,
    ok: false,
  };
}
