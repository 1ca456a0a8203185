/**
 * The status merge patch agentd sends: only its own fields, computed against a fresh read so the
 * writes of other controllers (machina, metalman) survive.
 */
import { NODE_UPDATED_CONDITION } from './schemas.js';
import type { Machine, MachineCondition, MachinePhase } from './schemas.js';

/** A condition agentd sets: its observedGeneration is the Machine's generation. */
export interface ConditionUpdate {
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message?: string;
}

/**
 * The conditions agentd owns (docs/watcher.md, "Status writes"): `NodeUpdated` (how the update
 * the Machine asked for went), and the observed state, kept in conditions because upstream's
 * structural schema prunes any other new status field (docs/compatibility.md): `NodeRunning`
 * (the active machine and the Kubernetes version it runs) and `LastOperation` (the last
 * operation's id, kind, result and end).
 */
export const NODE_RUNNING_CONDITION = 'NodeRunning';
export const LAST_OPERATION_CONDITION = 'LastOperation';

/** What agentd may change in a Machine's status. Omitted fields are left as they are. */
export interface MachineStatusUpdate {
  phase?: MachinePhase;
  /** `null` removes the message. */
  message?: string | null;
  /** Acknowledge a repave request: `status.operations.repaveCounter`. */
  repaveCounter?: number;
  /** The rootfs image now running: `status.agent.image`. */
  agentImage?: string;
  /** Set the `NodeUpdated` condition (its observedGeneration is the Machine's generation). */
  nodeUpdated?: ConditionUpdate;
  /** Set other conditions of agentd's, by type (`NodeRunning`, `LastOperation`). */
  conditions?: Record<string, ConditionUpdate>;
}

/** The JSON merge patch for `/status`, carrying the fresh resourceVersion as a precondition. */
export interface StatusMergePatch {
  metadata: { resourceVersion: string };
  status: Record<string, unknown>;
}

/** Kubernetes timestamps are RFC 3339 with second precision. */
export function kubeTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The condition list with only `NodeUpdated` replaced (or appended). A merge patch replaces a
 * list whole, so the others must be sent back exactly as read. lastTransitionTime moves only when
 * the condition's status changes, as `meta.SetStatusCondition` does.
 */
export function withNodeUpdatedCondition(
  conditions: readonly MachineCondition[],
  update: ConditionUpdate,
  generation: number,
  nowMs: number,
): MachineCondition[] {
  return withCondition(conditions, NODE_UPDATED_CONDITION, update, generation, nowMs);
}

/** The condition list with only the condition of `type` replaced (or appended). */
export function withCondition(
  conditions: readonly MachineCondition[],
  type: string,
  update: ConditionUpdate,
  generation: number,
  nowMs: number,
): MachineCondition[] {
  const previous = conditions.find((c) => c.type === type);
  const next: MachineCondition = {
    type,
    status: update.status,
    reason: update.reason,
    message: update.message ?? '',
    lastTransitionTime:
      previous !== undefined && previous.status === update.status && previous.lastTransitionTime
        ? previous.lastTransitionTime
        : kubeTimestamp(nowMs),
    observedGeneration: generation,
  };
  const out = conditions.map((c) => (c.type === type ? next : c));
  if (previous === undefined) out.push(next);
  return out;
}

/** Build the merge patch that applies `update` to `fresh`. */
export function buildStatusMergePatch(
  fresh: Machine,
  update: MachineStatusUpdate,
  nowMs: number,
): StatusMergePatch {
  const status: Record<string, unknown> = {};
  if (update.phase !== undefined) status.phase = update.phase;
  if (update.message !== undefined) status.message = update.message;
  // Nested objects merge key by key, so another writer's rebootCounter is kept.
  if (update.repaveCounter !== undefined) status.operations = { repaveCounter: update.repaveCounter };
  if (update.agentImage !== undefined) status.agent = { image: update.agentImage };
  const conditions: Record<string, ConditionUpdate> = {
    ...(update.nodeUpdated !== undefined ? { [NODE_UPDATED_CONDITION]: update.nodeUpdated } : {}),
    ...update.conditions,
  };
  if (Object.keys(conditions).length > 0) {
    let list: MachineCondition[] = [...(fresh.status?.conditions ?? [])];
    for (const [type, c] of Object.entries(conditions)) {
      list = withCondition(list, type, c, fresh.metadata.generation, nowMs);
    }
    status.conditions = list;
  }
  return { metadata: { resourceVersion: fresh.metadata.resourceVersion }, status };
}
