/**
 * What `update`, `reset`, `drain` and `uncordon` share before following: the request that starts
 * the operation. Until agentd answers it there is no operation id, yet the operation may have
 * started on the daemon all the same; agentctl says so, and how to find it, whenever it stops
 * without the answer (docs/operations.md):
 *
 * - Ctrl-C while the request is in flight is answered at once: agentctl waits for the answer to
 *   cancel the operation it started (update, drain), or to name it and detach (reset, uncordon,
 *   which agentd cannot cancel); a second Ctrl-C stops waiting (exit 130, `INTERRUPTED`).
 * - --timeout passing before the answer (exit 5, `TIMEOUT`), agentd closing the connection after
 *   the request went out (exit 3, `UNREACHABLE` with `reason: closed`; a connection that failed
 *   before: nothing was sent), or an answer cut short or garbled (exit 1, `BAD_ANSWER`): a lost
 *   answer, reported as for every call that changes something (src/cli/lost-answer.ts).
 *
 * Each carries `mayHaveStarted: true`. A dry run starts nothing: the first Ctrl-C ends it, and a
 * lost answer is only the usual error.
 */
import type { CliContext } from '../context.js';
import { CliError, CliExit, EXIT } from '../exit-codes.js';
import { lostAnswerError, type Change } from '../lost-answer.js';
import { isFinal, type Operation } from '../types.js';
import { agentctlCommand, type InterruptGuard } from './follow-command.js';

/** The kinds of operation an agentctl command starts; each is started by the method of its name. */
export type StartedKind = 'update' | 'reset' | 'drain' | 'uncordon';

/**
 * How an operation of each kind is undone once started. agentd cancels an update or a drain
 * before its point of no return (`operations.cancel`, docs/api.md); a reset or an uncordon cannot
 * be cancelled. `afterCancel` says what is left once it has been cancelled as it started.
 */
const UNDO: Record<
  StartedKind,
  { cancellable: true; afterCancel: (ctx: CliContext) => string } | { cancellable: false }
> = {
  update: { cancellable: true, afterCancel: () => 'nothing was changed' },
  // A cancelled drain keeps its cordon and what it evicted (docs/operations.md, "Drain").
  drain: {
    cancellable: true,
    afterCancel: (ctx) =>
      `pods it evicted stay evicted, and any cordon it made stays until: ${agentctlCommand(ctx, 'uncordon')}`,
  },
  reset: { cancellable: false },
  uncordon: { cancellable: false },
};

export interface StartOperationRequest {
  kind: StartedKind;
  params: Record<string, unknown>;
  /** The request is a dry run: it starts nothing. */
  dryRun?: boolean;
}

/**
 * Send the request that starts an operation and return the operation agentd answered. With a
 * Ctrl-C while the request was in flight, a cancellable operation is cancelled here (exit 130,
 * after printing how it ended); otherwise the caller follows the operation with the same guard,
 * which then detaches at once, naming it.
 */
export async function startOperation(
  ctx: CliContext,
  req: StartOperationRequest,
  interrupt: InterruptGuard,
): Promise<Operation> {
  const { kind } = req;
  const dryRun = Boolean(req.dryRun);
  const undo = UNDO[kind];
  // Ctrl-C before the request went out: nothing was started.
  if (interrupt.signal.aborted) {
    ctx.out.info(`interrupted before the ${kind} was requested; nothing was started`);
    throw new CliExit(EXIT.DETACHED);
  }
  // Ctrl-C while the request is in flight: say at once what happens, since the answer (with the
  // operation's id) may be slow to come; a second Ctrl-C stops waiting for it. A dry run changes
  // nothing: there the first one does.
  const onInterrupt = (): void =>
    ctx.out.info(
      undo.cancellable
        ? `interrupted: agentd has not answered the ${kind} request yet; waiting for its answer to cancel the ${kind} it may have started (Ctrl-C again to stop waiting: the ${kind} may then go on)`
        : `interrupted: agentd has not answered the ${kind} request yet; waiting for its answer to name the ${kind} it may have started, which cannot be cancelled (Ctrl-C again to stop waiting)`,
    );
  if (!dryRun) interrupt.signal.addEventListener('abort', onInterrupt, { once: true });
  const request = ctx.callUntyped<Operation>(kind, req.params);
  // Its failure matters only while agentctl waits for it (the race below).
  request.catch(() => undefined);
  let op: Operation;
  try {
    const answer = await Promise.race([request, interrupt.pressed(dryRun ? 1 : 2).then(() => null)]);
    if (answer === null) {
      if (dryRun) {
        ctx.out.info('interrupted; a dry run changes nothing');
        throw new CliExit(EXIT.DETACHED);
      }
      throw stoppedWaiting(ctx, kind);
    }
    op = answer;
  } catch (err) {
    throw (dryRun ? null : lostAnswerError(ctx, operationChange(ctx, kind), err)) ?? err;
  } finally {
    interrupt.signal.removeEventListener('abort', onInterrupt);
  }
  // Ctrl-C while the request was in flight: the operator did not want it to start, so the new
  // operation is cancelled (it undoes what it can); past its point of no return, or when it
  // cannot be cancelled, the caller follows it as a detach instead.
  if (interrupt.signal.aborted && !dryRun && undo.cancellable && !isFinal(op)) {
    try {
      await ctx.call('operations.cancel', { id: op.id });
      ctx.out.info(`interrupted: cancelled ${op.kind} ${op.id} as it started; ${undo.afterCancel(ctx)}`);
      const ended = await ctx.call('operations.wait', { id: op.id });
      ctx.out.result(ended, () => `${op.id} cancelled`);
      throw new CliExit(EXIT.DETACHED);
    } catch (err) {
      if (err instanceof CliExit) throw err;
      // Could not cancel it (past the point of no return): report it as a detach, with its id.
    }
  }
  return op;
}

/** How to find an operation agentctl did not get the id of, and follow (or cancel) it. */
function howToCheck(ctx: CliContext, kind: StartedKind): string {
  const cancel = UNDO[kind].cancellable ? ` (or cancel it: ${agentctlCommand(ctx, 'ops cancel <id>')})` : '';
  return `see it with: ${agentctlCommand(ctx, 'ops list')}, then follow it with: ${agentctlCommand(ctx, 'ops wait <id>')}${cancel}`;
}

/** The request that starts an operation of `kind`, for the messages when its answer is lost. */
export function operationChange(ctx: CliContext, kind: StartedKind): Change {
  return {
    request: `the ${kind} request`,
    effect: `the ${kind} may have started on the daemon`,
    check: howToCheck(ctx, kind),
  };
}

/** A second Ctrl-C before agentd answered the request: stop waiting for its answer. */
function stoppedWaiting(ctx: CliContext, kind: StartedKind): CliError {
  return new CliError(
    EXIT.DETACHED,
    `interrupted before agentd answered the ${kind} request; the ${kind} may have started on the daemon and go on: ${howToCheck(ctx, kind)}`,
    { code: 'INTERRUPTED', mayHaveStarted: true },
  );
}
