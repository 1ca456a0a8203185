import { CliError, EXIT } from '../exit-codes.js';
import type { CliContext } from '../context.js';
import { MAX_DURATION_MS } from '../program-options.js';

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
  const result = await callClient(ctx, params).callRaw(method, params);
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
