/** `agentctl config show`: the applied config of the active machine, secrets redacted. */
import type { CliContext } from '../context.js';

export async function runConfigShow(ctx: CliContext): Promise<void> {
  const applied = await ctx.call('config.get');
  ctx.out.result(applied, () =>
    [
      `# machine ${applied.machine}  sha256 ${applied.hash}${applied.verified ? '' : '  (no .sha256 sidecar: not verified)'}`,
      JSON.stringify(applied.config, null, 2),
    ].join('\n'),
  );
}
