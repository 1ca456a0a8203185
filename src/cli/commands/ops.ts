/** `agentctl ops list|get|wait|cancel`: the operation history and the running operation. */
import type { CliContext } from '../context.js';
import { agentctlCommand, followAndReport, resumeCommand } from '../follow/follow-command.js';
import { answerOf, type Change } from '../lost-answer.js';
import { renderOperation, renderOperationList } from '../render/operation.js';
import type { OperationState } from '../types.js';

export async function runOpsList(
  ctx: CliContext,
  flags: { limit?: number; state?: OperationState },
): Promise<void> {
  const result = await ctx.call('operations.list', {
    ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
    ...(flags.state !== undefined ? { state: flags.state } : {}),
  });
  ctx.out.result(result, () => renderOperationList(result.operations, ctx.out.paint, ctx.proc.clock.now()));
}

export async function runOpsGet(ctx: CliContext, id: string): Promise<void> {
  const op = await ctx.call('operations.get', { id });
  ctx.out.result(op, () => renderOperation(op, ctx.out.paint, ctx.proc.clock.now()));
}

/** Follow an operation (with progress) until it ends, or until `--timeout` (exit 5). */
export async function runOpsWait(ctx: CliContext, id: string, flags: { timeout?: number }): Promise<void> {
  const op = await ctx.call('operations.get', { id });
  await followAndReport(ctx, op, { timeoutMs: flags.timeout });
}

/** The request to cancel operation `id`, for the messages when its answer is lost. */
export function cancelChange(ctx: CliContext, id: string): Change {
  return {
    request: `the request to cancel ${id}`,
    effect: `the cancel of ${id} may have taken effect`,
    check: `see whether it did with: ${agentctlCommand(ctx, `ops get ${id}`)}`,
  };
}

export async function runOpsCancel(ctx: CliContext, id: string): Promise<void> {
  const op = await answerOf(ctx, cancelChange(ctx, id), ctx.call('operations.cancel', { id }));
  ctx.out.result(op, () =>
    [
      `cancel requested: ${op.kind} ${op.id} undoes what it did and ends cancelled`,
      `follow it with: ${resumeCommand(ctx, op.id)}`,
    ].join('\n'),
  );
}
