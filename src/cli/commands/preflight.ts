/** `agentctl preflight`: run the checks of an update without changing anything; exit 1 when one fails. */
import type { CliContext } from '../context.js';
import { CliExit, EXIT } from '../exit-codes.js';
import { targetParams, withFlagNames } from './update.js';
import { table } from '../output.js';

export async function runPreflight(
  ctx: CliContext,
  flags: { config?: string; kubernetesVersion?: string; image?: string },
): Promise<void> {
  // The same target flags as update, and the same rule: a config file or flags, not both.
  const params = await targetParams(ctx, flags);
  let result: { ok: boolean; checks: { name: string; ok: boolean; message: string }[] };
  try {
    result = await ctx.callUntyped('preflight', params);
  } catch (err) {
    throw withFlagNames(err, params.config !== undefined);
  }
  const p = ctx.out.paint.bind(ctx.out);
  ctx.out.result(result, () =>
    [
      table([
        ['CHECK', 'RESULT', 'MESSAGE'],
        ...result.checks.map((c) => [c.name, c.ok ? p('ok', 'good') : p('failed', 'bad'), c.message]),
      ]),
      '',
      result.ok
        ? p('all checks passed', 'good')
        : p(`${result.checks.filter((c) => !c.ok).length} check(s) failed`, 'bad'),
    ].join('\n'),
  );
  if (!result.ok) throw new CliExit(EXIT.FAILED);
}
