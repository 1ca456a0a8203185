/**
 * The status the watcher writes, as idempotent mutations for `patchMachineStatus`: each returns
 * only what differs from the fresh read (null when nothing does), so a reconcile that finds the
 * Machine already right writes nothing — and causes no watch event that would wake it again.
 */
import type { Machine, MachinePhase, MachineStatusMutation, MachineStatusUpdate } from '../kube/index.js';
import { NODE_UPDATED_CONDITION } from '../kube/index.js';

/** Messages agentd writes into `status.message` start with this, so it only ever clears its own. */
export const MESSAGE_PREFIX = 'agentd: ';

/** The fields the watcher wants; omitted ones are left alone. */
export interface WantedStatus {
  phase?: MachinePhase;
  /** A string sets `status.message`; null removes it, but only when agentd wrote it. */
  message?: string | null;
  /** Acknowledge up to this counter (never lowers what is there). */
  repaveCounter?: number;
  agentImage?: string;
  nodeUpdated?: NonNullable<MachineStatusUpdate['nodeUpdated']>;
}

/** The `NodeUpdated` condition as read, if any. */
export function nodeUpdatedCondition(machine: Machine) {
  return machine.status?.conditions?.find((c) => c.type === NODE_UPDATED_CONDITION);
}

/** A mutation writing `want`, reduced to what the fresh Machine does not already say. */
export function statusMutation(want: WantedStatus): MachineStatusMutation {
  return (fresh) => {
    const s = fresh.status ?? {};
    const update: MachineStatusUpdate = {};
    if (want.phase !== undefined && s.phase !== want.phase) update.phase = want.phase;
    if (typeof want.message === 'string' && s.message !== want.message) update.message = want.message;
    if (want.message === null && s.message?.startsWith(MESSAGE_PREFIX)) update.message = null;
    if (want.repaveCounter !== undefined && want.repaveCounter > (s.operations?.repaveCounter ?? 0))
      update.repaveCounter = want.repaveCounter;
    if (want.agentImage !== undefined && s.agent?.image !== want.agentImage)
      update.agentImage = want.agentImage;
    if (want.nodeUpdated !== undefined) {
      const c = nodeUpdatedCondition(fresh);
      const same =
        c !== undefined &&
        c.status === want.nodeUpdated.status &&
        c.reason === want.nodeUpdated.reason &&
        (c.message ?? '') === (want.nodeUpdated.message ?? '') &&
        c.observedGeneration === fresh.metadata.generation;
      if (!same) update.nodeUpdated = want.nodeUpdated;
    }
    return Object.keys(update).length === 0 ? null : update;
  };
}

/** Kubernetes condition messages are limited to 32768 bytes; keep ours far below. */
export function clip(text: string, max = 1000): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
