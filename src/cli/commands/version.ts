import { VERSION } from '../../version.js';
import type { CliContext } from '../context.js';
import { toCliError } from '../context.js';
import { CliExit, EXIT, type CliError } from '../exit-codes.js';

/**
 * `agentctl version`: client and daemon versions. The client's is always printed; when the
 * daemon cannot be asked, `daemon` is null, the reason is said on stderr (and in `error` with
 * --json), and the exit code is the failure's: 3 unreachable, 5 timed out (docs/cli.md).
 */
export async function runVersion(ctx: CliContext): Promise<void> {
  let daemon: { version: string; pid: number } | null = null;
  let failure: CliError | null = null;
  try {
    const s = await ctx.statusCheck();
    daemon = { version: s.daemon.version, pid: s.daemon.pid };
  } catch (err) {
    failure = toCliError(err, ctx.options.socket);
  }
  const daemonError = failure?.message ?? null;
  const sameVersion = daemon ? daemon.version === VERSION : null;
  const value = {
    client: { version: VERSION, node: process.version },
    daemon,
    sameVersion,
    ...(failure
      ? {
          daemonError,
          error: {
            ...failure.details,
            code: failure.details.code,
            message: failure.message,
            exitCode: failure.exitCode,
          },
        }
      : {}),
  };
  ctx.out.result(value, () =>
    [
      `agentctl ${VERSION} (node ${process.version})`,
      daemon
        ? `agentd   ${daemon.version} (pid ${daemon.pid})`
        : `agentd   ${failure?.exitCode === EXIT.UNREACHABLE ? 'unreachable' : 'did not answer'} (agentctl: below)`,
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
  if (failure) {
    ctx.out.error(failure.message);
    throw new CliExit(failure.exitCode);
  }
}
