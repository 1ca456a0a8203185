/**
 * agentctl entry: parse, run one command, map every failure to a documented exit code.
 */
import { CommanderError, type Command } from 'commander';
import { toCliError } from './context.js';
import { CliError, CliExit, EXIT } from './exit-codes.js';
import { defaultSocket } from './paths.js';
import { buildProgram, type ProgramIo } from './program.js';

export async function runCli(argv: string[], io: ProgramIo): Promise<number> {
  const program = buildProgram(io, argv.slice(2));
  // commander copies these settings to a subcommand only when it is created, and the tree is
  // already built: set them on every command, or `agentctl stop --bogus` would exit 1, not 2.
  const all = (cmd: Command): Command[] => [cmd, ...cmd.commands.flatMap(all)];
  for (const cmd of all(program)) {
    cmd.exitOverride().configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    });
  }
  const json = argv.includes('--json');
  try {
    await program.parseAsync(argv);
    return EXIT.OK;
  } catch (err) {
    // The command printed its result already; only the exit code is left to give.
    if (err instanceof CliExit) return err.exitCode;
    if (err instanceof CommanderError) {
      // Help and --version exit 0; every usage error is 2 (commander would say 1).
      if (err.exitCode === 0) return EXIT.OK;
      // commander printed its message on stderr; a script reading --json still gets one value.
      if (json) writeJsonError(io, { code: 'USAGE', message: usageMessage(err), exitCode: EXIT.USAGE });
      return EXIT.USAGE;
    }
    // Only for an error that does not know its socket; the transport's own errors name it.
    const socketIdx = argv.indexOf('--socket');
    const socket = socketIdx >= 0 ? (argv[socketIdx + 1] ?? '') : defaultSocket(io.env, io.cwd);
    const cliErr = err instanceof CliError ? err : toCliError(err, socket);
    if (json) writeJsonError(io, { message: cliErr.message, exitCode: cliErr.exitCode, ...cliErr.details });
    io.stderr.write(`agentctl: ${cliErr.message}\n`);
    return cliErr.exitCode;
  }
}

/** The one JSON value on stdout of a failed `--json` run. */
function writeJsonError(io: ProgramIo, error: Record<string, unknown>): void {
  io.stdout.write(`${JSON.stringify({ error }, null, 2)}\n`);
}

/** commander's message without its "error: " prefix; its help text when it showed help instead. */
function usageMessage(err: CommanderError): string {
  if (err.code === 'commander.help' || err.code === 'commander.helpDisplayed')
    return 'no command given (see agentctl --help)';
  return err.message.replace(/^error: /, '');
}
