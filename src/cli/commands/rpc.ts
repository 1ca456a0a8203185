import { CliError, EXIT } from '../exit-codes.js';
import type { CliContext } from '../context.js';

/** `agentctl rpc METHOD [PARAMS_JSON]`: a raw call; prints the result as JSON. */
export async function runRpc(ctx: CliContext, method: string, paramsJson: string | undefined): Promise<void> {
  let params: unknown = {};
  if (paramsJson !== undefined) {
    try {
      params = JSON.parse(paramsJson);
    } catch (err) {
      throw new CliError(EXIT.USAGE, `PARAMS_JSON is not valid JSON: ${(err as Error).message}`);
    }
    if (typeof params !== 'object' || params === null || Array.isArray(params)) {
      throw new CliError(EXIT.USAGE, 'PARAMS_JSON must be a JSON object of named parameters');
    }
  }
  const result = await ctx.client().callRaw(method, params);
  // Raw calls always print JSON: the result has no human rendering of its own. Through the
  // context's output (not process.stdout) so embedding runCli with its own streams works.
  ctx.out.result(result, () => JSON.stringify(result, null, 2));
}
