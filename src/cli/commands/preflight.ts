/** `agentctl preflight`: run the checks of an update without changing anything; exit 1 when one fails. */
import { readConfigFile } from '../config-file.js';
import type { CliContext } from '../context.js';
import { CliError, CliExit, EXIT } from '../exit-codes.js';
import { withFlagNames } from './update.js';
import { table } from '../output.js';

export async function runPreflight(
  ctx: CliContext,
  flags: { config?: string; kubernetesVersion?: string; image?: string },
): Promise<void> {
  // The same target flags as update, and the same rule: a config file or flags, not both.
  const set: Record<string, string> = {};
  if (flags.kubernetesVersion !== undefined) set.kubernetesVersion = flags.kubernetesVersion;
  if (flags.image !== undefined) set.image = flags.image;
  if (flags.config !== undefined && Object.keys(set).length > 0) {
    throw new CliError(
      EXIT.USAGE,
      '--config cannot be combined with --kubernetes-version or --image: put those in the config file',
    );
  }
  const config = flags.config !== undefined ? await readConfigFile(flags.config, ctx.cwd) : undefined;
  let result: { ok: boolean; checks: { name: string; ok: boolean; message: string }[] };
  try {
    result = await ctx.callUntyped('preflight', {
      ...(config ? { config } : {}),
      ...(Object.keys(set).length > 0 ? { set } : {}),
    });
  } catch (err) {
    throw withFlagNames(err, config !== undefined);
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
