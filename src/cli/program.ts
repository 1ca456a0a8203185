/**
 * agentctl's command tree (commander). Actions import their implementation lazily so that a
 * command loads only what it uses. `docs/cli.md` is generated from this tree.
 */
import { Command, Option } from 'commander';
import { parseDuration } from '../config/duration.js';
import { VERSION } from '../version.js';
import { createCliContext, type CliContext } from './context.js';
import { CliError, EXIT } from './exit-codes.js';
import { createOutput } from './output.js';
import { defaultPidFile, defaultSocket } from './paths.js';

export interface ProgramIo {
  env: NodeJS.ProcessEnv;
  cwd: string;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

function durationArg(flag: string) {
  return (value: string): number => {
    const ms = parseDuration(value);
    if (ms === null)
      throw new CliError(
        EXIT.USAGE,
        `${flag}: expected a duration such as 5s or 2m, got ${JSON.stringify(value)}`,
      );
    return ms;
  };
}

function example(cmd: Command, lines: string[]): Command {
  return cmd.addHelpText('after', `\nExamples:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`);
}

export function buildProgram(io: ProgramIo): Command {
  const program = new Command('agentctl')
    .description('Operate agentd, the node agent, over its unix socket.')
    .version(VERSION, '-V, --version', 'print the agentctl version')
    .option(
      '--socket <path>',
      'agentd socket (env AGENTD_SOCKET; default /run/agentd/agentd.sock, or ./.agentd/agentd.sock when only that exists)',
    )
    .option('--json', 'machine output: one JSON value on stdout; progress on stderr')
    .option('--timeout <duration>', 'give up on the daemon after this long', durationArg('--timeout'))
    .option('--no-color', 'no colors (also NO_COLOR)')
    .showHelpAfterError('(run agentctl help for usage)');

  const ctxOf = (cmd: Command): CliContext => {
    const g = cmd.optsWithGlobals<{ socket?: string; json?: boolean; timeout?: number; color?: boolean }>();
    const options = {
      socket: g.socket ?? defaultSocket(io.env, io.cwd),
      json: Boolean(g.json),
      timeoutMs: g.timeout,
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
    );
  };

  example(
    program.command('status').description('daemon, node, machines, and the current and last operation'),
    ['agentctl status', "agentctl status --json | jq -r '.node.activeMachine'"],
  ).action(async (_opts, cmd: Command) => {
    const { runStatus } = await import('./commands/status.js');
    await runStatus(ctxOf(cmd));
  });

  example(
    program
      .command('rpc')
      .description('raw JSON-RPC call; prints the result as JSON')
      .argument('<method>', 'method name (see: agentctl rpc rpc.discover)')
      .argument('[params_json]', 'named parameters as a JSON object'),
    ['agentctl rpc status', `agentctl rpc operations.list '{"limit":5}'`],
  ).action(async (method: string, params: string | undefined, _opts, cmd: Command) => {
    const { runRpc } = await import('./commands/rpc.js');
    await runRpc(ctxOf(cmd), method, params);
  });

  example(program.command('metrics').description('print the Prometheus metrics'), [
    'agentctl metrics | grep agentd_operations_total',
  ]).action(async (_opts, cmd: Command) => {
    const { runMetrics } = await import('./commands/metrics.js');
    await runMetrics(ctxOf(cmd));
  });

  example(program.command('version').description('client and daemon versions'), [
    'agentctl version --json',
  ]).action(async (_opts, cmd: Command) => {
    const { runVersion } = await import('./commands/version.js');
    await runVersion(ctxOf(cmd));
  });

  example(
    program
      .command('stop')
      .description('stop the daemon through its PID file: SIGTERM, wait, then SIGKILL')
      .option(
        '--pid-file <path>',
        'PID file (env AGENTD_PID_FILE; default /run/agentd/agentd.pid, or ./.agentd/agentd.pid)',
      )
      .addOption(
        new Option('--grace <duration>', 'wait this long after SIGTERM before SIGKILL')
          .default(5000, '5s')
          .argParser(durationArg('--grace')),
      ),
    ['agentctl stop', 'agentctl stop --pid-file .agentd/agentd.pid --grace 10s --json'],
  ).action(async (opts: { pidFile?: string; grace: number }, cmd: Command) => {
    const { runStop } = await import('./commands/stop.js');
    await runStop(ctxOf(cmd), {
      pidFile: opts.pidFile ?? defaultPidFile(io.env, io.cwd),
      graceMs: opts.grace,
    });
  });

  return program;
}
