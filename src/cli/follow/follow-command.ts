/**
 * What `update`, `reset`, `drain`, `uncordon` and `ops wait` share: follow the operation with
 * progress on stderr (live on a terminal, timestamped lines otherwise), print the final
 * operation, and exit 0 (succeeded), 1 (failed, rolled back, cancelled, interrupted),
 * 5 (still running at --timeout) or 130 (detached with Ctrl-C: it keeps running).
 */
import { formatDuration } from '../../config/duration.js';
import { toCliError, type CliContext } from '../context.js';
import { CliError, CliExit, EXIT } from '../exit-codes.js';
import { defaultSocket } from '../paths.js';
import { firstLine } from '../output.js';
import { renderOperation } from '../render/operation.js';
import type { Operation } from '../types.js';
import { followOperation, type ChangeSink } from './follow-operation.js';
import { createLiveView } from './live-view.js';
import { createPlainLines } from './plain-lines.js';
import { FollowModel } from './progress-model.js';

/** An agentctl command line for the operator, naming the socket when it is not the default. */
export function agentctlCommand(ctx: CliContext, args: string): string {
  const socket =
    ctx.options.socket === defaultSocket(ctx.env, ctx.cwd) ? '' : ` --socket ${ctx.options.socket}`;
  return `agentctl${socket} ${args}`;
}

/** The command that picks following up again. */
export function resumeCommand(ctx: CliContext, id: string): string {
  return agentctlCommand(ctx, `ops wait ${id}`);
}

function display(ctx: CliContext, model: FollowModel): { onChange: ChangeSink; finish(): void } {
  const now = (): number => ctx.proc.clock.now();
  const progress = ctx.out.progress;
  if (progress.tty) {
    const view = createLiveView({ model, stream: progress, now });
    return { onChange: () => view.update(), finish: () => view.finish() };
  }
  const plain = createPlainLines(now);
  return {
    onChange: (change) => {
      for (const line of plain.lines(change)) progress.write(`${line}\n`);
    },
    finish: () => undefined,
  };
}

/** Ctrl-C turned into an abort signal (a detach) for as long as the guard is in place. */
export interface InterruptGuard {
  /** Aborted at the first Ctrl-C. */
  signal: AbortSignal;
  /** Resolves once Ctrl-C has been pressed `times` times in all while the guard is in place. */
  pressed(times: number): Promise<void>;
  dispose(): void;
}

/**
 * Take over Ctrl-C. Commands that start an operation put this in place before the RPC that
 * starts it: a Ctrl-C while that call is in flight is then answered by `startOperation`
 * (start-operation.ts), instead of killing agentctl with the operation started but never named.
 */
export function guardInterrupt(ctx: CliContext): InterruptGuard {
  const controller = new AbortController();
  let presses = 0;
  const waiting: { times: number; resolve: () => void }[] = [];
  const remove = ctx.proc.onInterrupt(() => {
    presses += 1;
    controller.abort();
    for (const w of waiting.filter((x) => x.times <= presses)) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve();
    }
  });
  return {
    signal: controller.signal,
    pressed: (times) =>
      presses >= times ? Promise.resolve() : new Promise((resolve) => waiting.push({ times, resolve })),
    dispose: remove,
  };
}

export interface FollowCommandOptions {
  /** A guard the caller put in place before starting the operation (one is made otherwise). */
  interrupt?: InterruptGuard;
  /** Stop following after this long (ms); exit 5. */
  timeoutMs?: number;
  /** Human rendering of the final operation (default: `renderOperation`). */
  render?: (op: Operation) => string;
}

/** Follow `initial` to its end and report it; throws `CliExit`/`CliError` for a non-zero exit. */
export async function followAndReport(
  ctx: CliContext,
  initial: Operation,
  options: FollowCommandOptions = {},
): Promise<void> {
  const id = initial.id;
  const model = new FollowModel();
  const view = display(ctx, model);
  const interrupt = options.interrupt ?? guardInterrupt(ctx);
  let outcome;
  try {
    outcome = await followOperation({
      operation: initial,
      model,
      onChange: view.onChange,
      openStream: async (opId) => {
        const { openEventStream, MIN_STREAM_IDLE_MS } = await import('./event-stream.js');
        return openEventStream(ctx.options.socket, opId, {
          answerTimeoutMs: ctx.callTimeoutMs,
          idleMs: Math.max(ctx.callTimeoutMs, MIN_STREAM_IDLE_MS),
        });
      },
      getOperation: (opId) => ctx.call('operations.get', { id: opId }),
      waitOperation: (opId, timeoutSeconds) => ctx.call('operations.wait', { id: opId, timeoutSeconds }),
      clock: ctx.proc.clock,
      timeoutMs: options.timeoutMs,
      signal: interrupt.signal,
    });
  } catch (err) {
    view.finish();
    const e = toCliError(err, ctx.options.socket);
    // Following broke (the daemon went away?): the operation may well go on; say how to resume.
    throw new CliError(
      e.exitCode,
      `${e.message}; following ${initial.kind} ${id} stopped, it may still be running: ${resumeCommand(ctx, id)}`,
      { ...e.details, operation: id },
    );
  } finally {
    interrupt.dispose();
  }
  view.finish();
  const op = outcome.operation;
  // On a terminal that just watched the live phase list, the first line says the rest again.
  const compact = ctx.out.tty && ctx.out.progress.tty;
  const render =
    options.render ??
    ((o: Operation) => {
      const text = renderOperation(o, ctx.out.paint, ctx.proc.clock.now());
      return compact ? (text.split('\n')[0] ?? '') : text;
    });
  switch (outcome.kind) {
    case 'detached':
      // Human stdout stays empty: nothing ended. --json still gets its one value.
      if (ctx.out.json) ctx.out.result(op, () => '');
      ctx.out.info(
        `detached; ${op.kind} ${id} keeps running. Follow it again with: ${resumeCommand(ctx, id)}`,
      );
      throw new CliExit(EXIT.DETACHED);
    case 'timeout':
      ctx.out.result(op, () => render(op));
      ctx.out.error(
        `${op.kind} ${id} is still ${op.state} after ${formatDuration(options.timeoutMs ?? 0)}; keep following: ${resumeCommand(ctx, id)}`,
      );
      throw new CliExit(EXIT.TIMEOUT);
    default:
      ctx.out.result(op, () => render(op));
      if (op.state !== 'succeeded') {
        ctx.out.error(`${op.kind} ${id} ${op.state}${op.error ? `: ${firstLine(op.error.message)}` : ''}`);
        throw new CliExit(EXIT.FAILED);
      }
  }
}
