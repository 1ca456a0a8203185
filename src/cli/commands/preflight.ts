/** `agentctl preflight`: run the checks of an update without changing anything; exit 1 when one fails. */
import { readConfigFile } from '../config-file.js';
import type { CliContext } from '../context.js';
import { CliExit, EXIT } from '../exit-codes.js';
import { table } from '../output.js';

export async function runPreflight(ctx: CliContext, flags: { config?: string }): Promise<void> {
  const config = flags.config !== undefined ? await readConfigFile(flags.config, ctx.cwd) : undefined;
  const result = await ctx.callUntyped<{
    ok: boolean;
    checks: { name: string; ok: boolean; message: string }[];
  }>('preflight', config ? { config } : {});
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
