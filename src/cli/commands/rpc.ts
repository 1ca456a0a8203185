import type { MethodName } from '../../rpc/methods/index.js';
import { CliError, EXIT } from '../exit-codes.js';
import type { CliContext } from '../context.js';
import { agentctlCommand } from '../follow/follow-command.js';
import { operationChange, type StartedKind } from '../follow/start-operation.js';
import { answerOf, mayChange, type Change } from '../lost-answer.js';
import { MAX_DURATION_MS } from '../program-options.js';
import { fleetChange } from './fleet.js';
import { cancelChange } from './ops.js';

/** `agentctl rpc METHOD [PARAMS_JSON]`: a raw call; prints the result as JSON. */
export async function runRpc(ctx: CliContext, method: string, paramsJson: string | undefined): Promise<void> {
  let params: Record<string, unknown> = {};
  if (paramsJson !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(paramsJson);
    } catch (err) {
      throw new CliError(EXIT.USAGE, `PARAMS_JSON is not valid JSON: ${(err as Error).message}`, {
        code: 'USAGE',
      });
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new CliError(EXIT.USAGE, 'PARAMS_JSON must be a JSON object of named parameters', {
        code: 'USAGE',
      });
    }
    params = parsed as Record<string, unknown>;
  }
  const call = callClient(ctx, params).callRaw(method, params);
  const change = changeOf(ctx, method, params);
  const result = change === null ? await call : await answerOf(ctx, change, call);
  // Raw calls always print JSON: the result has no human rendering of its own. Through the
  // context's output (not process.stdout) so embedding runCli with its own streams works.
  ctx.out.result(result, () => JSON.stringify(result, null, 2));
}

/**
 * The client of the call. A call that may wait on the daemon's side (`operations.wait`, or a
 * `wait: true` bounded by `timeoutSeconds`) gets that long on top of the default call timeout,
 * so that it is not cut short; an explicit --timeout is kept as given.
 */
function callClient(ctx: CliContext, params: Record<string, unknown>) {
  const waits = params.timeoutSeconds;
  if (ctx.options.timeoutMs !== undefined || typeof waits !== 'number' || !(waits > 0)) return ctx.client();
  return ctx.client(Math.min(MAX_DURATION_MS, ctx.callTimeoutMs + Math.ceil(waits * 1000)));
}

/**
 * A call that may change something (src/cli/lost-answer.ts), for the messages when its answer is
 * lost: named as the agentctl command that makes the same call names it; null for a read.
 */
function changeOf(ctx: CliContext, method: string, params: Record<string, unknown>): Change | null {
  if (!mayChange(method, params)) return null;
  switch (method as MethodName) {
    case 'update':
    case 'reset':
    case 'drain':
    case 'uncordon':
      return operationChange(ctx, method as StartedKind);
    case 'operations.cancel':
      if (typeof params.id === 'string') return cancelChange(ctx, params.id);
      break;
    case 'fleet.pause':
      return fleetChange(ctx, 'pause');
    case 'fleet.resume':
      return fleetChange(ctx, 'resume');
  }
  return {
    request: `the ${method} request`,
    effect: `the ${method} call may have changed something on the daemon`,
    check: `see what it did before calling it again: ${agentctlCommand(ctx, 'status')}`,
  };
}
