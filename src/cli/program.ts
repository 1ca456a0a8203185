/**
 * agentctl's command tree (commander). Actions import their implementation lazily so that a
 * command loads only what it uses. `docs/cli.md` and the completion scripts are generated from
 * this tree.
 */
import { Command } from 'commander';
import { VERSION } from '../version.js';
import { createCliContext, defaultCliProcess } from './context.js';
import { createOutput } from './output.js';
import { defaultSocket } from './paths.js';
import { defineAdminCommands } from './program-admin.js';
import { defineFleetCommands } from './program-fleet.js';
import { defineNodeCommands } from './program-node.js';
import { globalOptions, globalValues, type ContextOf, type ProgramIo } from './program-options.js';
import { defineOpsCommands } from './program-ops.js';

export type { ContextOf, ProgramIo } from './program-options.js';

export function buildProgram(io: ProgramIo): Command {
  const program = new Command('agentctl')
    .description('Operate agentd, the node agent, over its unix socket.')
    .version(VERSION, '-V, --version', 'print the agentctl version')
    .enablePositionalOptions()
    .showHelpAfterError('(run agentctl help for usage)')
    .configureHelp({ showGlobalOptions: true });
  for (const o of globalOptions(true)) program.addOption(o);

  const ctxOf: ContextOf = (cmd) => {
    const g = globalValues(cmd);
    const options = {
      socket: typeof g.socket === 'string' ? g.socket : defaultSocket(io.env, io.cwd),
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
  defineNodeCommands(program, ctxOf, io);
  defineOpsCommands(program, ctxOf);
  defineFleetCommands(program, ctxOf);
  defineAdminCommands(program, ctxOf, io);
  return program;
}
