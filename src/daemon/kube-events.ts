/**
 * Which Kubernetes Events agentd records (docs/watcher.md, "Events"), derived from the engine's
 * event bus, never from inside the engine's steps: each operation's state changes and phase ends
 * become at most one Event each, and a wait in the fleet gate, or a slot held, that lasts longer
 * than the window becomes one Event per window (a repeat: the recorder raises its series count).
 * `emit` must return at once (the recorder only enqueues): the bus calls it synchronously.
 */
import type { EngineEvent, EventBus } from '../engine/events.js';
import type { Operation, OperationKind } from '../engine/operation.js';
import type { Clock } from '../host/types.js';
import type { EventInput } from '../kube/event-recorder.js';

/** What the daemon says happened; the wiring records it on the Machine and on the Node. */
export type NodeEvent = Omit<EventInput, 'regarding'>;

/** How long a wait in the fleet gate, or a held slot, lasts before it is an Event (default 5 min). */
export const FLEET_EVENT_WINDOW_MS = 5 * 60_000;

const ENDED_KEPT = 64;

export interface OperationEventsOptions {
  events: EventBus;
  emit: (event: NodeEvent) => void;
  clock: Clock;
  fleetWindowMs?: number;
}

interface Tracked {
  kind: OperationKind;
  /** The update's target machine. */
  to: string;
  started: boolean;
  /** The fleet gate's wait reason now, and the timer that reports it once it lasts. */
  wait: { reason: string; message: string; stop: AbortController } | null;
  /** The timer that reports a slot held for longer than the window. */
  hold: AbortController | null;
}

const describeError = (op: Operation): string =>
  op.error ? `${op.error.code}: ${op.error.message}` : 'no error recorded';

function formatWindow(ms: number): string {
  const s = Math.round(ms / 1000);
  return s % 60 === 0 ? `${s / 60}m` : `${s}s`;
}

/**
 * The Event an operation's state change is, or null. Notes name no operation id, so the same
 * outcome again (a target that rolls back at each request) is a repeat: one Event, its count raised.
 */
function operationEvent(op: Operation, first: boolean): NodeEvent | null {
  const move = `${op.from ?? 'new node'} → ${op.to ?? '?'}`;
  const why = op.reason ? ` (${op.reason})` : '';
  const ok = (reason: string, action: string, note: string): NodeEvent => ({
    type: 'Normal',
    reason,
    action,
    note,
  });
  const bad = (reason: string, action: string, note: string): NodeEvent => ({
    type: 'Warning',
    reason,
    action,
    note,
  });
  if (op.state === 'running') {
    if (!first) return null;
    if (op.kind === 'update') return ok('UpdateStarted', 'Update', `update started: ${move}${why}`);
    if (op.kind === 'repair') return ok('RepairStarted', 'Repair', `repair started${why}`);
    return null;
  }
  switch (`${op.kind}/${op.state}`) {
    case 'update/succeeded':
      return ok('UpdateSucceeded', 'Update', `update succeeded: ${move}`);
    case 'update/rolled_back':
      return bad(
        'RolledBack',
        'Update',
        `update rolled back to ${op.from ?? '?'} (${op.error?.code ?? 'INTERNAL'}): ${op.error?.message ?? 'no error recorded'}`,
      );
    case 'update/failed':
      return bad('UpdateFailed', 'Update', `update failed: ${describeError(op)}`);
    case 'repair/succeeded':
      return ok('Repaired', 'Repair', `repair succeeded: the node serves again`);
    case 'repair/failed':
    case 'repair/rolled_back':
      return bad('RepairFailed', 'Repair', `repair failed: ${describeError(op)}`);
    case 'drain/succeeded':
      return ok('Drained', 'Drain', `drain succeeded${why}`);
    case 'drain/failed':
      return bad('DrainFailed', 'Drain', `drain failed: ${describeError(op)}`);
    case 'uncordon/succeeded': {
      const outcome = typeof op.result?.outcome === 'string' ? ` (${op.result.outcome})` : '';
      return ok('Uncordoned', 'Uncordon', `uncordon succeeded${outcome}`);
    }
    case 'uncordon/failed':
      return bad('UncordonFailed', 'Uncordon', `uncordon failed: ${describeError(op)}`);
    default:
      return null;
  }
}

/** The Event an update's phase end is, or null; `to` is the update's target machine. */
function phaseEvent(e: Extract<EngineEvent, { type: 'phase' }>, to: string): NodeEvent | null {
  if (e.state === 'succeeded') {
    if (e.phase === 'start')
      return {
        type: 'Normal',
        reason: 'Switched',
        action: 'Update',
        note: `update switched to ${to}`,
      };
    if (e.phase === 'verify')
      return {
        type: 'Normal',
        reason: 'Verified',
        action: 'Update',
        note: `update verified ${to}: kubelet is healthy`,
      };
    if (e.phase === 'drain')
      return { type: 'Normal', reason: 'Drained', action: 'Drain', note: `update drained the node` };
    if (e.phase === 'uncordon')
      return {
        type: 'Normal',
        reason: 'Uncordoned',
        action: 'Uncordon',
        note: `update uncordoned the node`,
      };
  }
  if (e.state === 'failed' && e.phase === 'drain')
    return {
      type: 'Warning',
      reason: 'DrainFailed',
      action: 'Drain',
      note: `update could not drain the node: ${e.error ?? 'no error recorded'}`,
    };
  return null;
}

/** Follow the bus until the returned function is called. */
export function followOperationEvents(o: OperationEventsOptions): () => void {
  const windowMs = o.fleetWindowMs ?? FLEET_EVENT_WINDOW_MS;
  const ops = new Map<string, Tracked>();
  /** Operations whose end was recorded (a later publish of the same end records nothing). */
  const ended = new Set<string>();
  const every = (stop: AbortController, fn: () => void): void => {
    void (async () => {
      for (;;) {
        await o.clock.sleep(windowMs, stop.signal);
        if (stop.signal.aborted) return;
        fn();
      }
    })().catch(() => undefined); // aborted
  };

  function stopTimers(t: Tracked): void {
    t.wait?.stop.abort();
    t.wait = null;
    t.hold?.abort();
    t.hold = null;
  }

  function onOperation(op: Operation): void {
    if (ended.has(op.id)) return;
    let t = ops.get(op.id);
    const first = t === undefined || !t.started;
    if (t === undefined) {
      t = { kind: op.kind, to: op.to ?? 'the new machine', started: false, wait: null, hold: null };
      ops.set(op.id, t);
    }
    if (op.state === 'pending') return;
    const event = operationEvent(op, first);
    t.started = true;
    if (event !== null) o.emit(event);
    if (op.state !== 'running') {
      stopTimers(t);
      ops.delete(op.id);
      ended.add(op.id);
      for (const id of ended) {
        if (ended.size <= ENDED_KEPT) break;
        ended.delete(id);
      }
      return;
    }
    const wait = op.wait;
    if (wait === undefined) {
      t.wait?.stop.abort();
      t.wait = null;
    } else if (t.wait === null || t.wait.reason !== wait.reason) {
      t.wait?.stop.abort();
      const w = { reason: wait.reason, message: wait.message, stop: new AbortController() };
      t.wait = w;
      every(w.stop, () =>
        o.emit({
          type: 'Warning',
          reason: w.reason,
          action: 'WaitForSlot',
          note: `the update has waited in the fleet gate for longer than ${formatWindow(windowMs)}: ${w.message}`,
        }),
      );
    } else {
      t.wait.message = wait.message;
    }
  }

  const unsubscribe = o.events.subscribe((_seq, e) => {
    if (e.type === 'operation') {
      onOperation(e.operation);
      return;
    }
    if (e.type !== 'phase') return;
    const t = ops.get(e.operationId);
    if (t?.kind !== 'update') return;
    const event = phaseEvent(e, t.to);
    if (event !== null) o.emit(event);
    if (e.phase === 'slot' && e.state === 'succeeded' && t.hold === null) {
      const hold = new AbortController();
      t.hold = hold;
      every(hold, () =>
        o.emit({
          type: 'Warning',
          reason: 'SlotHeldLong',
          action: 'HoldSlot',
          note: `the update has held its fleet slot for longer than ${formatWindow(windowMs)}`,
        }),
      );
    }
  });

  return () => {
    unsubscribe();
    for (const t of ops.values()) stopTimers(t);
    ops.clear();
  };
}
