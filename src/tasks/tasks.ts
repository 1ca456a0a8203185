/**
 * The task runner: named steps composed serially or in parallel, cancelled through one
 * AbortSignal, each logged with its duration and measured, each able to publish progress.
 */
import type { Logger } from 'pino';
import { CancelledError, isAgentError } from '../errors.js';
import type { ProgressSink } from '../host/types.js';
import type { Metrics } from '../metrics/metrics.js';

export interface TaskContext {
  signal: AbortSignal;
  logger: Logger;
  progress: ProgressSink;
  /** Task durations go to `agentd_task_duration_seconds` when given. */
  metrics?: Metrics;
}

export interface Task {
  name: string;
  run(ctx: TaskContext): Promise<void>;
}

/** A leaf task. */
export function task(name: string, run: (ctx: TaskContext) => Promise<void>): Task {
  return { name, run };
}

/** Run `tasks` one after another; the first failure stops the rest. */
export function serial(name: string, tasks: Task[]): Task {
  return {
    name,
    async run(ctx) {
      for (const t of tasks) await runTask(t, ctx);
    },
  };
}

/**
 * Run `tasks` at once. The first failure aborts the siblings (through a child signal) and is
 * the one reported, after every sibling has settled — nothing keeps running behind our back.
 */
export function parallel(name: string, tasks: Task[]): Task {
  return {
    name,
    async run(ctx) {
      const controller = new AbortController();
      const onAbort = (): void => controller.abort(ctx.signal.reason);
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      let first: unknown = null;
      try {
        await Promise.all(
          tasks.map((t) =>
            runTask(t, { ...ctx, signal: controller.signal }).catch((err: unknown) => {
              first ??= err;
              controller.abort(err);
            }),
          ),
        );
      } finally {
        ctx.signal.removeEventListener('abort', onAbort);
      }
      if (first !== null) throw first;
    },
  };
}

/** Task loggers → the logger their task tree started from, and their task path. */
const TASK_LOGGERS = new WeakMap<Logger, { root: Logger; path: string }>();

/** Run one task with logging, timing and cancellation checks around it. */
export async function runTask(t: Task, ctx: TaskContext): Promise<void> {
  if (ctx.signal.aborted) throw new CancelledError(t.name, { cause: ctx.signal.reason });
  const started = performance.now();
  // Nested tasks log their path (`provision/install/install artifacts`) under one `task` key:
  // a child of the outermost task's parent, since pino would repeat a key bound twice.
  const parent = TASK_LOGGERS.get(ctx.logger);
  const root = parent?.root ?? ctx.logger;
  const taskPath = parent ? `${parent.path}/${t.name}` : t.name;
  const logger = root.child({ task: taskPath });
  TASK_LOGGERS.set(logger, { root, path: taskPath });
  logger.debug(`task ${taskPath} started`);
  let result = 'ok';
  try {
    await t.run({ ...ctx, logger });
  } catch (err) {
    result = ctx.signal.aborted ? 'cancelled' : 'error';
    logger.debug({ err: isAgentError(err) ? err.code : String(err) }, `task ${taskPath} failed`);
    throw err;
  } finally {
    const seconds = (performance.now() - started) / 1000;
    ctx.metrics?.taskDuration.observe({ task: t.name, result }, seconds);
    if (result === 'ok')
      logger.debug(
        { durationMs: Math.round(seconds * 1000) },
        `task ${taskPath} done in ${Math.round(seconds * 1000)} ms`,
      );
  }
}
