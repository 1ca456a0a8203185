/**
 * agentctl entry: parse, run one command, map every failure to a documented exit code.
 */
import { CommanderError, type Command } from 'commander';
import { VERSION } from '../version.js';
import { toCliError } from './context.js';
import { CliError, CliExit, EXIT } from './exit-codes.js';
import { defaultSocket } from './paths.js';
import { buildProgram, firstOperand, type ProgramIo } from './program.js';

/** Why `--json` and help do not go together: help is text, and has no JSON form. */
const HELP_IS_TEXT = '--json: help is text only: run it without --json (the reference is docs/cli.md)';

export async function runCli(argv: string[], io: ProgramIo): Promise<number> {
  const args = argv.slice(2);
  const json = args.includes('--json');
  if (json && (firstOperand(args) === 'help' || args.includes('--help') || args.includes('-h'))) {
    // Refused before commander prints any of it: stdout gets the one JSON value.
    writeJsonError(io, { code: 'USAGE', message: HELP_IS_TEXT, exitCode: EXIT.USAGE });
    io.stderr.write(`agentctl: ${HELP_IS_TEXT}\n`);
    return EXIT.USAGE;
  }
  const program = buildProgram(io, args);
  // commander copies these settings to a subcommand only when it is created, and the tree is
  // already built: set them on every command, or `agentctl stop --bogus` would exit 1, not 2.
  const all = (cmd: Command): Command[] => [cmd, ...cmd.commands.flatMap(all)];
  for (const cmd of all(program)) {
    cmd.exitOverride().configureOutput({
      // Only help and --version write to stdout; with --json, stdout is for one JSON value.
      writeOut: (s) => void (json || io.stdout.write(s)),
      writeErr: (s) => io.stderr.write(s),
      // Every message of agentctl's starts with its name, commander's usage errors too.
      outputError: (message, write) => write(`agentctl: ${message.replace(/^error: /, '')}`),
    });
  }
  try {
    await program.parseAsync(argv);
    return EXIT.OK;
  } catch (err) {
    // The command printed its result already; only the exit code is left to give.
    if (err instanceof CliExit) return err.exitCode;
    if (err instanceof CommanderError) {
      if (json && err.code === 'commander.version') {
        io.stdout.write(`${JSON.stringify({ version: VERSION }, null, 2)}\n`);
        return EXIT.OK;
      }
      if (json && err.exitCode === 0) {
        // Help asked for some other way than above: still no JSON of it to give.
        writeJsonError(io, { code: 'USAGE', message: HELP_IS_TEXT, exitCode: EXIT.USAGE });
        io.stderr.write(`agentctl: ${HELP_IS_TEXT}\n`);
        return EXIT.USAGE;
      }
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
    if (json) {
      const { code, ...details } = cliErr.details;
      writeJsonError(io, { code, message: cliErr.message, exitCode: cliErr.exitCode, ...details });
    }
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
