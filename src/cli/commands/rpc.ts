import { CliError, EXIT } from '../exit-codes.js';
import type { CliContext } from '../context.js';

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
  const result = await ctx.client().callRaw(method, params);
  // Raw calls always print JSON: the result has no human rendering of its own. Through the
  // context's output (not process.stdout) so embedding runCli with its own streams works.
  ctx.out.result(result, () => JSON.stringify(result, null, 2));
}
