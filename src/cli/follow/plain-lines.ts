/**
 * Progress as plain timestamped lines (stderr that is not a terminal: logs, CI, `--json` piped):
 * one line per operation state change and phase transition, one each time the reason or message
 * of a wait (the fleet gate) changes, and few lines per task — when its message changes, when it
 * completes, or every `taskIntervalMs` while it moves.
 */
import { firstLine, formatBytes, formatElapsed } from '../output.js';
import { routeOf } from '../render/operation.js';
import type { Operation } from '../types.js';
import type { ModelChange, PhaseProgress, TaskProgress } from './progress-model.js';

/** A task line at most this often while nothing but its byte count changes. */
const TASK_INTERVAL_MS = 5000;

export interface PlainLines {
  /** The line(s) for one change of the model (possibly none). */
  lines(change: ModelChange): string[];
}

const stamp = (ms: number): string => new Date(ms).toISOString();

function bytesText(t: TaskProgress): string {
  if (t.bytes === null) return '';
  const amount = t.totalBytes ? `${formatBytes(t.bytes)}/${formatBytes(t.totalBytes)}` : formatBytes(t.bytes);
  const rate = t.rate !== null && t.rate > 0 ? ` ${formatBytes(Math.round(t.rate))}/s` : '';
  return ` ${amount}${rate}`;
}

function phaseLine(p: PhaseProgress, at: number): string {
  const took =
    p.startedAt !== null && p.finishedAt !== null && p.state !== 'running'
      ? ` (${formatElapsed(p.finishedAt - p.startedAt)})`
      : '';
  const error = p.state === 'failed' && p.error ? `: ${firstLine(p.error)}` : '';
  return `${stamp(at)}  phase ${p.name} ${p.state}${took}${error}`;
}

export function createPlainLines(now: () => number, taskIntervalMs = TASK_INTERVAL_MS): PlainLines {
  const shown = new Map<string, { message: string | null; at: number; done: boolean }>();
  // The last state printed per phase: a snapshot (following started late, or an event was
  // missed between the answer and the subscription) prints only what no line said yet.
  const printed = new Map<string, string>();
  /**
   * Every wait printed (since, reason and message): an unchanged wait prints no new line, nor
   * does one that an older snapshot brings back.
   */
  const waitsShown = new Set<string>();
  const waitLines = (op: Operation): string[] => {
    if (!op.wait) return [];
    const key = `${op.wait.since}\u0000${op.wait.reason}\u0000${op.wait.message}`;
    if (waitsShown.has(key)) return [];
    waitsShown.add(key);
    const at = Date.parse(op.wait.since) || now();
    return [`${stamp(at)}  waiting: ${op.wait.reason}: ${op.wait.message}`];
  };
  /** `untimed`: the time of a phase the snapshot gives no time for. */
  const phaseLines = (phases: readonly PhaseProgress[], untimed: number): string[] =>
    phases
      .filter((p) => p.state !== 'pending' && printed.get(p.name) !== p.state)
      .map((p) => {
        printed.set(p.name, p.state);
        return phaseLine(p, p.finishedAt ?? p.startedAt ?? untimed);
      });
  return {
    lines(change) {
      switch (change.kind) {
        case 'operation': {
          const op = change.operation;
          // A phase an ended operation never ran may have no time of its own (recovery marks the
          // phases after the interrupted one skipped): it ended with the operation, not now.
          const ended = op.finishedAt ? Date.parse(op.finishedAt) : NaN;
          const caughtUp = [
            ...phaseLines(change.phases, Number.isNaN(ended) ? now() : ended),
            ...waitLines(op),
          ];
          if (op.state === change.previousState) return caughtUp;
          const at = Date.parse(op.finishedAt ?? op.startedAt ?? op.createdAt) || now();
          const route = routeOf(op) ? ` ${routeOf(op)}` : '';
          const error = op.error ? `: ${firstLine(op.error.message)}` : '';
          const line = `${stamp(at)}  ${op.kind} ${op.id}${route} ${op.state}${error}`;
          // The operation's start before its phases, its end after them.
          return op.finishedAt ? [...caughtUp, line] : [line, ...caughtUp];
        }
        case 'phase': {
          if (printed.get(change.phase.name) === change.phase.state) return [];
          printed.set(change.phase.name, change.phase.state);
          return [phaseLine(change.phase, change.at)];
        }
        case 'progress': {
          const t = change.task;
          const key = `${t.phase}\u0000${t.task}`;
          const before = shown.get(key);
          const done = t.totalBytes !== null && t.bytes !== null && t.bytes >= t.totalBytes;
          const due =
            !before ||
            before.message !== t.message ||
            (done && !before.done) ||
            (!done && change.at - before.at >= taskIntervalMs);
          if (!due) return [];
          shown.set(key, { message: t.message, at: change.at, done });
          const message = t.message ? ` ${t.message}` : done ? ' done' : '';
          return [`${stamp(change.at)}  ${t.phase}: ${t.task}${message}${bytesText(t)}`];
        }
        default:
          return [];
      }
    },
  };
}
