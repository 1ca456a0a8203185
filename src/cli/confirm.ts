/**
 * Confirmation of destructive commands (`reset`, `uninstall`): asked on a terminal unless
 * `--yes`; refused without `--yes` when there is no terminal to ask on (a script must say so).
 */
import readline from 'node:readline';
import type { CliContext } from './context.js';
import { CliError, EXIT } from './exit-codes.js';

/** Ask `question` on stderr and read y/N from stdin. Ctrl-C or end of input is "no". */
export function ask(
  stdin: NodeJS.ReadableStream,
  stderr: NodeJS.WritableStream,
  question: string,
): Promise<boolean> {
  const rl = readline.createInterface({ input: stdin, output: stderr });
  return new Promise((resolve) => {
    rl.on('SIGINT', () => {
      stderr.write('\n');
      rl.close();
    });
    rl.on('close', () => resolve(false));
    rl.question(`${question} [y/N] `, (answer) => {
      resolve(/^(y|yes)$/i.test(answer.trim()));
      rl.close();
    });
  });
}

/**
 * Go ahead only with `--yes` or a "yes" typed at the terminal. Throws a usage error (exit 2)
 * without a terminal, and a failure (exit 1) when the operator says no.
 */
export async function confirmOrRefuse(
  ctx: CliContext,
  o: { yes: boolean; command: string; question: string; stderr: NodeJS.WritableStream },
): Promise<void> {
  if (o.yes) return;
  if (!ctx.proc.stdin.isTTY) {
    throw new CliError(
      EXIT.USAGE,
      `${o.command} needs confirmation and there is no terminal to ask on: pass --yes`,
      { code: 'CONFIRMATION_REQUIRED' },
    );
  }
  if (!(await ask(ctx.proc.stdin, o.stderr, o.question))) {
    throw new CliError(EXIT.FAILED, `${o.command}: not confirmed; nothing was changed`, {
      code: 'NOT_CONFIRMED',
    });
  }
}
