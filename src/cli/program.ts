/**
 * agentctl's command tree (commander). Actions import their implementation lazily so that a
 * command loads only what it uses. `docs/cli.md` and the completion scripts are generated from
 * this tree.
 */
import { Command, Help } from 'commander';
import { VERSION } from '../version.js';
import { createCliContext, defaultCliProcess } from './context.js';
import { CliError, EXIT } from './exit-codes.js';
import { createOutput } from './output.js';
import { defaultSocket, socketPathProblem } from './paths.js';
import { defineAdminCommands } from './program-admin.js';
import { defineFleetCommands } from './program-fleet.js';
import { defineNodeCommands } from './program-node.js';
import { globalOptions, globalValues, type ContextOf, type ProgramIo, type Want } from './program-options.js';
import { defineOpsCommands } from './program-ops.js';

export type { ContextOf, ProgramIo } from './program-options.js';

/**
 * agentctl's program. Given the run's arguments (after `node agentctl`), and when they name a
 * command, only that top-level command is defined: building the whole tree (every command's
 * options, the hidden copies of the global options, the examples) was ~7 ms of a `status` call
 * in the release executable (docs/benchmarks.md, "CLI startup"), and a command's own parsing,
 * help and errors do not depend on its siblings. Without arguments (docs, completion scripts),
 * or when the first operand is not a command (help, a typo that commander suggests a fix for),
 * or for `completion` (whose script lists every command), the whole tree.
 */
export function buildProgram(io: ProgramIo, args?: readonly string[]): Command {
  const named = args === undefined ? undefined : firstOperand(args);
  if (named !== undefined && named !== 'completion') {
    const program = defineProgram(io, (name) => name === named);
    if (program.commands.length > 0) return program;
  }
  return defineProgram(io, () => true);
}

/** The first argument that is not a global option or its value: the command's name, if any. */
export function firstOperand(args: readonly string[]): string | undefined {
  const takesValue = new Set(
    globalOptions(true)
      .filter((o) => o.required)
      .map((o) => o.long),
  );
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') return args[i + 1];
    if (!arg.startsWith('-')) return arg;
    if (takesValue.has(arg)) i++;
  }
  return undefined;
}

function defineProgram(io: ProgramIo, want: Want): Command {
  const program = new Command('agentctl')
    .description('Operate agentd, the node agent, over its unix socket.')
    .version(VERSION, '-V, --version', 'print the agentctl version (with --json: {"version": ...})')
    .enablePositionalOptions()
    .showHelpAfterError('(run agentctl help for usage)')
    .configureHelp({
      showGlobalOptions: true,
      // `--version` is agentctl's own: after a command's name it is an unknown option, so a
      // command's help does not list it among the global options.
      visibleGlobalOptions(this: Help, cmd: Command) {
        return Help.prototype.visibleGlobalOptions.call(this, cmd).filter((o) => o.long !== '--version');
      },
    });
  for (const o of globalOptions(true)) program.addOption(o);

  const ctxOf: ContextOf = (cmd) => {
    const g = globalValues(cmd);
    // --socket was checked as it was parsed; the socket from the environment is checked here.
    const socket = typeof g.socket === 'string' ? g.socket : defaultSocket(io.env, io.cwd);
    const problem = typeof g.socket === 'string' || !io.env.AGENTD_SOCKET ? null : socketPathProblem(socket);
    if (problem !== null)
      throw new CliError(EXIT.USAGE, `AGENTD_SOCKET (${socket}) ${problem}`, {
        code: 'USAGE',
        env: 'AGENTD_SOCKET',
      });
    const options = {
      socket,
      json: Boolean(g.json),
      timeoutMs: typeof g.timeout === 'number' ? g.timeout : undefined,
      color: g.color !== false,
    };
    return createCliContext(
      options,
      createOutput({
        json: options.json,
        colorFlag: options.color,
        env: io.env,
        stdout: io.stdout,
        stderr: io.stderr,
      }),
      io.env,
      io.cwd,
      io.proc ?? defaultCliProcess,
    );
  };

  // In the order `agentctl help` lists them: the node, then operations and config, then the daemon.
  defineNodeCommands(program, ctxOf, io, want);
  defineOpsCommands(program, ctxOf, want);
  defineFleetCommands(program, ctxOf, want);
  defineAdminCommands(program, ctxOf, io, want);
  return program;
}
