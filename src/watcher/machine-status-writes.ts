/**
 * The status the watcher writes, as idempotent mutations for `patchMachineStatus`: each returns
 * only what differs from the fresh read (null when nothing does), so a reconcile that finds the
 * Machine already right writes nothing — and causes no watch event that would wake it again.
 */
import type {
  ConditionUpdate,
  Machine,
  MachinePhase,
  MachineStatusMutation,
  MachineStatusUpdate,
} from '../kube/index.js';
import { LAST_OPERATION_CONDITION, NODE_RUNNING_CONDITION, NODE_UPDATED_CONDITION } from '../kube/index.js';
import type { RpcClient } from '../rpc/client.js';

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
  nodeUpdated?: ConditionUpdate;
  /** What runs (docs/watcher.md, "What runs"): written with every write, and when an operation ends. */
  observed?: ObservedStatus;
}

/**
 * The observed state next to the spec, only in fields that both deploy/'s CRD and upstream's keep
 * (docs/compatibility.md, "Observed state"): the image in `status.agent.image`, the acknowledged
 * counter in `status.operations.repaveCounter` (written by the reconcile), the rest as conditions.
 */
export interface ObservedStatus {
  /** The image the active machine runs (`status.agent.image`); absent: no machine runs. */
  image?: string;
  /** `NodeRunning`: the active machine and its Kubernetes version. */
  running: ConditionUpdate;
  /** `LastOperation`: the last operation that ended; absent before any ended. */
  lastOperation?: ConditionUpdate;
}

const CAMEL_STATES: Record<string, string> = {
  succeeded: 'Succeeded',
  failed: 'Failed',
  rolled_back: 'RolledBack',
  cancelled: 'Cancelled',
  interrupted: 'Interrupted',
};

/** Read what runs and the last operation that ended, from the daemon's own API. */
export async function readObservedStatus(rpc: Pick<RpcClient, 'call'>): Promise<ObservedStatus> {
  const [status, list] = await Promise.all([rpc.call('status'), rpc.call('operations.list', { limit: 20 })]);
  const active = status.node.activeMachine;
  const applied = status.node.applied;
  const observed: ObservedStatus = {
    running:
      active !== null && applied !== null
        ? {
            status: 'True',
            reason: 'Running',
            message: `${active} runs Kubernetes v${applied.kubernetesVersion.replace(/^v/, '')}`,
          }
        : { status: 'False', reason: 'NoActiveMachine', message: 'no machine is active' },
  };
  if (active !== null && applied !== null) observed.image = applied.image;
  const last = list.operations.find((op) => op.finishedAt !== null && CAMEL_STATES[op.state] !== undefined);
  if (last !== undefined) {
    const why = last.error ? `: ${last.error.code}: ${last.error.message}` : '';
    observed.lastOperation = {
      status: last.state === 'succeeded' ? 'True' : 'False',
      reason: CAMEL_STATES[last.state] ?? 'Unknown',
      message: clip(`${last.kind} ${last.id} ${last.state} at ${last.finishedAt ?? '?'}${why}`),
    };
  }
  return observed;
}

const sameCondition = (fresh: Machine, type: string, want: ConditionUpdate): boolean => {
  const c = fresh.status?.conditions?.find((x) => x.type === type);
  return (
    c !== undefined &&
    c.status === want.status &&
    c.reason === want.reason &&
    (c.message ?? '') === (want.message ?? '') &&
    c.observedGeneration === fresh.metadata.generation
  );
};

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
    const image = want.agentImage ?? want.observed?.image;
    if (image !== undefined && s.agent?.image !== image) update.agentImage = image;
    if (want.nodeUpdated !== undefined && !sameCondition(fresh, NODE_UPDATED_CONDITION, want.nodeUpdated))
      update.nodeUpdated = want.nodeUpdated;
    const conditions: Record<string, ConditionUpdate> = {};
    const o = want.observed;
    if (o !== undefined && !sameCondition(fresh, NODE_RUNNING_CONDITION, o.running))
      conditions[NODE_RUNNING_CONDITION] = o.running;
    if (o?.lastOperation !== undefined && !sameCondition(fresh, LAST_OPERATION_CONDITION, o.lastOperation))
      conditions[LAST_OPERATION_CONDITION] = o.lastOperation;
    if (Object.keys(conditions).length > 0) update.conditions = conditions;
    return Object.keys(update).length === 0 ? null : update;
  };
}

/** Kubernetes condition messages are limited to 32768 bytes; keep ours far below. */
export function clip(text: string, max = 1000): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
