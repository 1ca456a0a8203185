/** The task runner: serial and parallel composition, cancellation, and task metrics. */
import { describe, expect, it } from 'vitest';
import { parallel, runTask, serial, task, type TaskContext } from '../../../src/tasks/tasks.js';
import { CancelledError, isAgentError } from '../../../src/errors.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { silentLogger } from '../engine/fakes.js';

function ctx(signal = new AbortController().signal): TaskContext {
  return { signal, logger: silentLogger, progress: () => undefined };
}

/** A promise with its resolve, to order tasks without timers. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('serial', () => {
  it('runs in order and stops at the first failure', async () => {
    const seen: string[] = [];
    const t = serial('all', [
      task('a', async () => void seen.push('a')),
      task('b', async () => {
        seen.push('b');
        throw new Error('b broke');
      }),
      task('c', async () => void seen.push('c')),
    ]);
    await expect(runTask(t, ctx())).rejects.toThrow('b broke');
    expect(seen).toEqual(['a', 'b']);
  });
});

describe('parallel', () => {
  it('runs the tasks at the same time', async () => {
    const a = deferred();
    const b = deferred();
    const seen: string[] = [];
    // Each waits for the other to have started: this only finishes when both run at once.
    const t = parallel('both', [
      task('a', async () => {
        a.resolve();
        await b.promise;
        seen.push('a');
      }),
      task('b', async () => {
        b.resolve();
        await a.promise;
        seen.push('b');
      }),
    ]);
    await runTask(t, ctx());
    expect(seen.sort()).toEqual(['a', 'b']);
  });

  it('the first failure aborts the siblings and is reported after they all settled', async () => {
    const settled: string[] = [];
    const aStarted = deferred();
    const t = parallel('both', [
      task('slow', async (c) => {
        aStarted.resolve();
        await new Promise<void>((resolve) =>
          c.signal.addEventListener('abort', () => resolve(), { once: true }),
        );
        settled.push(`slow saw abort: ${String((c.signal.reason as Error).message)}`);
      }),
      task('broken', async () => {
        await aStarted.promise;
        throw new Error('download failed');
      }),
    ]);
    await expect(runTask(t, ctx())).rejects.toThrow('download failed');
    expect(settled).toEqual(['slow saw abort: download failed']);
  });

  it("the parent's cancel reaches every child", async () => {
    const controller = new AbortController();
    const started = deferred();
    const reasons: unknown[] = [];
    const waitAbort = (c: TaskContext): Promise<void> =>
      new Promise<void>((_resolve, reject) =>
        c.signal.addEventListener(
          'abort',
          () => {
            reasons.push(c.signal.reason);
            reject(new CancelledError('child', { cause: c.signal.reason }));
          },
          { once: true },
        ),
      );
    const t = parallel('both', [
      task('one', async (c) => {
        started.resolve();
        await waitAbort(c);
      }),
      task('two', (c) => waitAbort(c)),
    ]);
    const run = runTask(t, ctx(controller.signal));
    await started.promise;
    const reason = new CancelledError('operation op-1');
    controller.abort(reason);
    const err = await run.catch((e: unknown) => e);
    expect(isAgentError(err) && err.code).toBe('CANCELLED');
    expect(reasons).toEqual([reason, reason]);
  });
});

describe('runTask', () => {
  it('an already cancelled context does not start the task', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    let ran = false;
    const err = await runTask(
      task('x', async () => void (ran = true)),
      ctx(controller.signal),
    ).catch((e: unknown) => e);
    expect(isAgentError(err) && err.code).toBe('CANCELLED');
    expect(ran).toBe(false);
  });

  it('records each task in agentd_task_duration_seconds with its result', async () => {
    const metrics = createMetrics({ version: 'test', collectDefaults: false });
    const c = { ...ctx(), metrics };
    await runTask(
      task('ok-task', async () => undefined),
      c,
    );
    await runTask(
      task('bad-task', async () => {
        throw new Error('no');
      }),
      c,
    ).catch(() => undefined);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/agentd_task_duration_seconds_count\{task="ok-task",result="ok"\} 1/);
    expect(text).toMatch(/agentd_task_duration_seconds_count\{task="bad-task",result="error"\} 1/);
  });
});
