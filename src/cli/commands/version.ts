import { VERSION } from '../../version.js';
import type { CliContext } from '../context.js';
import { toCliError } from '../context.js';

/** `agentctl version`: client and daemon versions; the daemon part is null when unreachable. */
export async function runVersion(ctx: CliContext): Promise<void> {
  let daemon: { version: string; pid: number } | null = null;
  let daemonError: string | null = null;
  try {
    const s = await ctx.statusCheck();
    daemon = { version: s.daemon.version, pid: s.daemon.pid };
  } catch (err) {
    daemonError = toCliError(err, ctx.options.socket).message;
  }
  const sameVersion = daemon ? daemon.version === VERSION : null;
  const value = {
    client: { version: VERSION, node: process.version },
    daemon,
    sameVersion,
    ...(daemonError ? { daemonError } : {}),
  };
  ctx.out.result(value, () =>
    [
      `agentctl ${VERSION} (node ${process.version})`,
      daemon
        ? `agentd   ${daemon.version} (pid ${daemon.pid})`
        : `agentd   unreachable: ${daemonError ?? ''}`,
      ...(sameVersion === false
        ? [
            ctx.out.paint(
              'note: the versions differ; a command that needs a method this agentd lacks says so',
              'warn',
            ),
          ]
        : []),
    ].join('\n'),
  );
}
