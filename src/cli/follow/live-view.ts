/**
 * The live progress display on a terminal (stderr): the operation, then every phase with its
 * state and elapsed time, and under a running phase why it waits (the fleet gate) and its moving
 * tasks with bytes and rate.
 * Redrawn in place; only used when stderr is a terminal.
 */
import {
  firstLine,
  formatBytes,
  formatElapsed,
  stripAnsiLength,
  toneOf,
  type ProgressStream,
} from '../output.js';
import { routeOf } from '../render/operation.js';
import type { FollowModel, PhaseProgress, TaskProgress } from './progress-model.js';

const MARK: Record<string, string> = {
  pending: '·',
  running: '▸',
  succeeded: '✓',
  failed: '✗',
  skipped: '-',
  cancelled: '-',
};
/** At most this many task lines under a running phase (downloads run in parallel). */
const MAX_TASK_LINES = 6;

function phaseElapsed(p: PhaseProgress, now: number): string {
  if (p.startedAt === null) return '';
  return formatElapsed((p.finishedAt ?? now) - p.startedAt);
}

function taskLine(t: TaskProgress): string {
  const parts = [t.task];
  if (t.bytes !== null) {
    parts.push(
      t.totalBytes
        ? `${formatBytes(t.bytes)} / ${formatBytes(t.totalBytes)}  ${Math.floor((t.bytes * 100) / t.totalBytes)}%`
        : formatBytes(t.bytes),
    );
  }
  if (t.rate !== null && t.rate > 0) parts.push(`${formatBytes(Math.round(t.rate))}/s`);
  if (t.message) parts.push(t.message);
  return parts.join('  ');
}

/** The lines of the display at `now` (pure: the unit tests call it directly). */
export function renderLiveLines(model: FollowModel, now: number, paint: ProgressStream['paint']): string[] {
  const op = model.operation;
  if (!op) return ['waiting for the operation…'];
  const started = Date.parse(op.startedAt ?? op.createdAt);
  const ended = op.finishedAt ? Date.parse(op.finishedAt) : now;
  const route = routeOf(op) ? `  ${routeOf(op)}` : '';
  const lines = [
    `${op.kind} ${op.id}${route}  ${paint(op.state, toneOf(op.state))}  ${formatElapsed(ended - started)}`,
  ];
  const width = Math.max(...model.phases.map((p) => p.name.length), 5);
  for (const p of model.phases) {
    const elapsed = phaseElapsed(p, now);
    lines.push(
      `  ${paint(MARK[p.state] ?? '?', toneOf(p.state))} ${p.name.padEnd(width)}  ${paint(p.state.padEnd(9), toneOf(p.state))}  ${elapsed}`.trimEnd(),
    );
    if (p.state === 'failed' && p.error) lines.push(`      ${paint(firstLine(p.error), 'bad')}`);
    if (p.state === 'running' && op.wait) {
      // Why the running phase waits (the fleet gate): redrawn when the reason or message changes.
      const since = Date.parse(op.wait.since);
      const waited = Number.isNaN(since) ? '' : `  ${formatElapsed(now - since)}`;
      lines.push(`      ${paint(`waiting: ${op.wait.reason}`, 'warn')}  ${op.wait.message}${waited}`);
    }
    if (p.state === 'running') {
      const tasks = model.activeTasks(p.name);
      for (const t of tasks.slice(0, MAX_TASK_LINES)) lines.push(`      ${paint(taskLine(t), 'dim')}`);
      if (tasks.length > MAX_TASK_LINES) lines.push(`      … ${tasks.length - MAX_TASK_LINES} more`);
    }
  }
  return lines;
}

/** Cut a line to the terminal width (a wrapped line would break the in-place redraw). */
function fit(line: string, columns: number): string {
  if (stripAnsiLength(line) < columns) return line;
  // eslint-disable-next-line no-control-regex
  const plain = line.replace(/\u001b\[[0-9;]*m/g, '');
  return `${plain.slice(0, Math.max(0, columns - 2))}…`;
}

export interface LiveView {
  /** Something changed: redraw soon (at most every `minIntervalMs`). */
  update(): void;
  /** Draw a last time and stop the timers. */
  finish(): void;
}

export interface LiveViewOptions {
  model: FollowModel;
  stream: ProgressStream;
  now: () => number;
  /** Redraw at least this often so elapsed times move (default 1 s). */
  tickMs?: number;
  /** Redraw at most this often (default 100 ms). */
  minIntervalMs?: number;
}

/** The in-place redrawing display. The timers only repaint; they never decide anything. */
export function createLiveView(o: LiveViewOptions): LiveView {
  let drawnLines = 0;
  let pending: NodeJS.Timeout | null = null;
  let lastDraw = 0;
  const draw = (): void => {
    pending = null;
    lastDraw = o.now();
    const lines = renderLiveLines(o.model, lastDraw, o.stream.paint).map((l) => fit(l, o.stream.columns));
    // Up to the first line of the previous drawing, clear from there down, draw again.
    const up = drawnLines > 0 ? `\u001b[${drawnLines}A\r\u001b[J` : '';
    o.stream.write(`${up}${lines.join('\n')}\n`);
    drawnLines = lines.length;
  };
  const ticker = setInterval(draw, o.tickMs ?? 1000);
  ticker.unref();
  return {
    update() {
      if (pending) return;
      const wait = Math.max(0, lastDraw + (o.minIntervalMs ?? 100) - o.now());
      if (wait === 0) draw();
      else {
        pending = setTimeout(draw, wait);
        pending.unref();
      }
    },
    finish() {
      clearInterval(ticker);
      if (pending) clearTimeout(pending);
      draw();
    },
  };
}
