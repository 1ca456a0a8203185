/**
 * What a follower knows about the operation it follows, built from the event stream: the
 * operation, each phase's state and times, and per task the bytes done and the rate. Both
 * progress displays (live and plain lines) render from this model.
 */
import type { Operation, Phase, StreamEvent } from '../types.js';

export interface PhaseProgress {
  name: string;
  state: Phase['state'];
  /** Epoch ms, or null before the phase starts. */
  startedAt: number | null;
  finishedAt: number | null;
  error: string | null;
}

export interface TaskProgress {
  phase: string;
  task: string;
  message: string | null;
  bytes: number | null;
  totalBytes: number | null;
  /** Bytes per second since the task's first progress event; null until there are two. */
  rate: number | null;
  /** Epoch ms of the first and the latest event of the task. */
  firstAt: number;
  lastAt: number;
  firstBytes: number;
}

/** What one event changed, for the plain-lines display. */
export type ModelChange =
  | {
      kind: 'operation';
      operation: Operation;
      previousState: string | null;
      phases: readonly PhaseProgress[];
    }
  | { kind: 'phase'; phase: PhaseProgress; at: number }
  | { kind: 'progress'; task: TaskProgress; at: number };

const time = (iso: string | null | undefined): number | null => {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
};

/** pending < running < any final state (of an operation, or of a phase: neither goes back). */
function rank(state: string): number {
  return state === 'pending' ? 0 : state === 'running' ? 1 : 2;
}

export class FollowModel {
  operation: Operation | null = null;
  phases: PhaseProgress[] = [];
  readonly tasks = new Map<string, TaskProgress>();

  /** Apply one event; returns what changed (nothing for an event of another operation). */
  apply(event: StreamEvent, receivedAt: number): ModelChange | null {
    switch (event.type) {
      case 'operation':
        return this.applyOperation(event.operation);
      case 'phase': {
        if (this.operation && event.operationId !== this.operation.id) return null;
        const at = time(event.at) ?? receivedAt;
        const phase = this.phase(event.phase);
        // An event sent before the snapshot the follower took after subscribing (it waited in
        // the stream meanwhile) may say less than the model knows: it changes nothing.
        if (rank(event.state) < rank(phase.state)) return null;
        phase.state = event.state;
        if (event.state === 'running') phase.startedAt = at;
        else if (event.state !== 'pending') phase.finishedAt = at;
        if (event.error) phase.error = event.error;
        return { kind: 'phase', phase, at };
      }
      case 'progress': {
        if (this.operation && event.operationId !== this.operation.id) return null;
        const at = time(event.at) ?? receivedAt;
        const key = `${event.phase}\u0000${event.task}`;
        let task = this.tasks.get(key);
        if (!task) {
          task = {
            phase: event.phase,
            task: event.task,
            message: null,
            bytes: null,
            totalBytes: null,
            rate: null,
            firstAt: at,
            lastAt: at,
            firstBytes: event.bytes ?? 0,
          };
          this.tasks.set(key, task);
        }
        task.lastAt = at;
        if (event.message !== undefined) task.message = event.message;
        if (event.bytes !== undefined) task.bytes = event.bytes;
        if (event.totalBytes !== undefined) task.totalBytes = event.totalBytes;
        if (task.bytes !== null && at > task.firstAt)
          task.rate = ((task.bytes - task.firstBytes) * 1000) / (at - task.firstAt);
        return { kind: 'progress', task, at };
      }
      default:
        return null;
    }
  }

  /** Take a whole operation (from the stream's snapshot, an operation event or operations.get). */
  applyOperation(op: Operation): ModelChange | null {
    if (this.operation && op.id !== this.operation.id) return null;
    // Snapshots can arrive out of order (the answer to `update` or `operations.get`, the stream's
    // first event, taken when it was opened, and a late `operation` event of the engine): never
    // let an older one move the operation or any of its phases backwards.
    if (this.isOlder(op)) return null;
    const previousState = this.operation?.state ?? null;
    this.operation = op;
    for (const p of op.phases) {
      const phase = this.phase(p.name);
      // A newer operation state may still list a phase behind what its events said.
      if (rank(p.state) < rank(phase.state)) continue;
      phase.state = p.state;
      phase.startedAt = time(p.startedAt) ?? phase.startedAt;
      phase.finishedAt = time(p.finishedAt) ?? phase.finishedAt;
      phase.error = p.error?.message ?? phase.error;
    }
    return { kind: 'operation', operation: op, previousState, phases: this.phases };
  }

  /**
   * `op` says less than the model knows: an earlier operation state, or the same state with a
   * phase not as far along as a phase event or an earlier snapshot said.
   */
  private isOlder(op: Operation): boolean {
    if (!this.operation) return false;
    const ranks = rank(op.state) - rank(this.operation.state);
    if (ranks !== 0) return ranks < 0;
    return op.phases.some((p) => {
      const known = this.phases.find((k) => k.name === p.name);
      return known !== undefined && rank(p.state) < rank(known.state);
    });
  }

  /** The tasks of a phase that are still moving (for the live display). */
  activeTasks(phase: string): TaskProgress[] {
    return [...this.tasks.values()].filter(
      (t) => t.phase === phase && !(t.totalBytes !== null && t.bytes !== null && t.bytes >= t.totalBytes),
    );
  }

  private phase(name: string): PhaseProgress {
    let phase = this.phases.find((p) => p.name === name);
    if (!phase) {
      phase = { name, state: 'pending', startedAt: null, finishedAt: null, error: null };
      this.phases.push(phase);
    }
    return phase;
  }
}
