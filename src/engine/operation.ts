/**
 * Operations: what `update`, `reset`, `drain` and `uncordon` create, persist and report.
 * These types are the engine's; `src/rpc/schemas.ts` describes the same shapes for the wire.
 */
import type { MachineName } from '../host/types.js';
import type { StatusWarning } from './warnings.js';

export const OPERATION_STATES = [
  'pending',
  'running',
  'succeeded',
  'failed',
  'rolled_back',
  'cancelled',
  'interrupted',
] as const;
export type OperationState = (typeof OPERATION_STATES)[number];
export const FINAL_STATES: ReadonlySet<OperationState> = new Set([
  'succeeded',
  'failed',
  'rolled_back',
  'cancelled',
  'interrupted',
]);

export const OPERATION_KINDS = ['update', 'reset', 'drain', 'uncordon', 'repair'] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

export const PHASE_STATES = ['pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled'] as const;
export type PhaseState = (typeof PHASE_STATES)[number];

/** An error as recorded in an operation: the stable code, the message and its data. */
export interface ErrorInfo {
  code: string;
  message: string;
  data?: Record<string, unknown>;
}

export interface PhaseRecord {
  name: string;
  state: PhaseState;
  startedAt: string | null;
  finishedAt: string | null;
  error: ErrorInfo | null;
}

/** Why the update waits, e.g. in the fleet gate (docs/fleet.md): the Machine condition's reason. */
export const WAIT_REASONS = ['WaitingForSlot', 'OutsideWindow', 'Paused', 'Halted'] as const;
export interface OperationWait {
  reason: (typeof WAIT_REASONS)[number];
  message: string;
  /** When it began to wait for this reason (ISO). */
  since: string;
}

export interface Operation {
  id: string;
  kind: OperationKind;
  state: OperationState;
  reason: string | null;
  requestedBy: string;
  idempotencyKey: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  from: MachineName | null;
  to: MachineName | null;
  phases: PhaseRecord[];
  result: Record<string, unknown> | null;
  error: ErrorInfo | null;
  /** Set only while the operation waits (the fleet gate's `slot` phase). */
  wait?: OperationWait;
}

/** Summary of the applied config of the active machine, as `status` reports it. */
export interface AppliedSummary {
  kubernetesVersion: string;
  image: string;
  hash: string;
}

export interface MachineStatus {
  name: MachineName;
  state: 'running' | 'stopped' | 'absent';
  kubelet: 'active' | 'inactive' | 'failed' | 'unknown';
}

export interface NodeStatus {
  activeMachine: MachineName | null;
  /** The active machine runs and its kubelet is active and healthy (docs/operations.md). */
  serving: boolean;
  /** Why the node does not serve; null while it serves. */
  servingReason: string | null;
  applied: AppliedSummary | null;
  machines: MachineStatus[];
  cordoned: boolean | null;
  /** What `status` warns about, typed (src/engine/warnings.ts); the wire shows their messages too. */
  warnings: StatusWarning[];
  /** What repair is doing; null when the engine has none (tests). */
  repair: {
    state: 'off' | 'idle' | 'repairing' | 'backoff' | 'gave_up';
    failures: number;
    nextAttemptAt: string | null;
    lastError: string | null;
    lastOperation: string | null;
  } | null;
  /** When the read these facts come from started (ISO 8601); null before the first read. */
  observedAt: string | null;
}
