/** agentctl commands about the daemon itself: rpc, metrics, stop, uninstall, version, completion. */
import { Argument, Option, type Command } from 'commander';
import { SHELLS, type Shell } from './completion/shells.js';
import { defaultPidFile } from './paths.js';
import {
  durationArg,
  example,
  globalValues,
  withGlobals,
  type ContextOf,
  type ProgramIo,
  type Want,
} from './program-options.js';

const PID_FILE_HELP =
  'PID file (env AGENTD_PID_FILE; default /run/agentd/agentd.pid, or ./.agentd/agentd.pid)';

export function defineAdminCommands(program: Command, ctxOf: ContextOf, io: ProgramIo, want: Want): void {
  if (want('rpc')) {
    example(
      withGlobals(
        program
          .command('rpc')
          .description('raw JSON-RPC call; prints the result as JSON')
          .argument('<method>', 'method name (see: agentctl rpc rpc.discover)')
          .argument(
            '[params_json]',
            'named parameters as a JSON object (a timeoutSeconds in them is added to the default --timeout)',
          ),
      ),
      ['agentctl rpc status', `agentctl rpc operations.list '{"limit":5}'`],
    ).action(async (method: string, params: string | undefined, _opts, cmd: Command) => {
      const { runRpc } = await import('./commands/rpc.js');
      await runRpc(ctxOf(cmd), method, params);
    });
  }

  if (want('metrics')) {
    example(withGlobals(program.command('metrics').description('print the Prometheus metrics')), [
      'agentctl metrics | grep agentd_operations_total',
    ]).action(async (_opts, cmd: Command) => {
      const { runMetrics } = await import('./commands/metrics.js');
      await runMetrics(ctxOf(cmd));
    });
  }

  const grace = (note = ''): Option =>
    new Option('--grace <duration>', `wait this long after SIGTERM before SIGKILL${note}`)
      .default(5000, '5s')
      .argParser(durationArg('--grace'));

  if (want('stop')) {
    example(
      withGlobals(
        program
          .command('stop')
          .description('stop the daemon through its PID file: SIGTERM, wait, then SIGKILL')
          .option(
            '--pid-file <path>',
            'PID file (env AGENTD_PID_FILE; default: the one the daemon on the socket says it writes, else /run/agentd/agentd.pid, or ./.agentd/agentd.pid)',
          )
          .addOption(grace(" (at least the daemon's --shutdown-grace, unless --force)"))
          .option(
            '--force',
            "SIGKILL after --grace even when the daemon's own --shutdown-grace is longer (may cut an operation short)",
          ),
      ),
      ['agentctl stop', 'agentctl stop --pid-file .agentd/agentd.pid --grace 10s --json'],
    ).action(async (opts: { pidFile?: string; grace: number; force?: boolean }, cmd: Command) => {
      const { runStop } = await import('./commands/stop.js');
      await runStop(ctxOf(cmd), {
        pidFile: opts.pidFile ?? defaultPidFile(io.env, io.cwd),
        pidFileNamed: opts.pidFile !== undefined || Boolean(io.env.AGENTD_PID_FILE),
        socketNamed: typeof globalValues(cmd).socket === 'string' || Boolean(io.env.AGENTD_SOCKET),
        graceMs: opts.grace,
        force: Boolean(opts.force),
      });
    });
  }

  if (want('uninstall')) {
    example(
      withGlobals(
        program
          .command('uninstall')
          .description(
            'stop the daemon, tear down both machines, remove their files, configs, state and the unit; prints each step',
          )
          .addOption(grace())
          .option('--yes', 'do not ask for confirmation (required when not on a terminal)')
          .option('--keep-config', 'keep the applied configs and /etc/agentd')
          .option('--pid-file <path>', PID_FILE_HELP)
          .addOption(
            new Option('--root <dir>', 'advanced: the host root agentd ran with (its --root)').default('/'),
          )
          .addOption(
            new Option(
              '--host <kind>',
              'the host agentd managed (its --host); required when no daemon answers, refused when it differs',
            ).choices(['systemd', 'sim']),
          )
          .addOption(
            new Option(
              '--state-dir <dir>',
              "advanced: agentd's state directory (its --state-dir; default <root>/var/lib/agentd)",
            ),
          )
          .addOption(
            new Option('--systemd <mode>', 'whether systemd runs (auto: /run/systemd/system exists)')
              .choices(['auto', 'yes', 'no'])
              .default('auto')
              .hideHelp(),
          ),
      ),
      ['sudo agentctl uninstall', 'sudo agentctl uninstall --yes --keep-config --json'],
    ).action(
      async (
        opts: {
          grace: number;
          yes?: boolean;
          keepConfig?: boolean;
          pidFile?: string;
          root: string;
          stateDir?: string;
          systemd: 'auto' | 'yes' | 'no';
          host?: 'systemd' | 'sim';
        },
        cmd: Command,
      ) => {
        const { runUninstall } = await import('./commands/uninstall.js');
        await runUninstall(ctxOf(cmd), {
          ...opts,
          pidFile: opts.pidFile ?? defaultPidFile(io.env, io.cwd),
          stderr: io.stderr,
        });
      },
    );
  }

  if (want('version')) {
    example(
      withGlobals(
        program
          .command('version')
          .description('client and daemon versions (exit 3 when the daemon cannot be reached)'),
      ),
      ['agentctl version', 'agentctl version --json'],
    ).action(async (_opts, cmd: Command) => {
      const { runVersion } = await import('./commands/version.js');
      await runVersion(ctxOf(cmd));
    });
  }

  if (want('completion')) {
    example(
      withGlobals(
        program
          .command('completion')
          .description('print the shell completion script')
          .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(SHELLS)),
      ),
      [
        'source <(agentctl completion bash)',
        'agentctl completion zsh > "${fpath[1]}/_agentctl"',
        'agentctl completion fish > ~/.config/fish/completions/agentctl.fish',
      ],
    ).action(async (shell: Shell, _opts, cmd: Command) => {
      const { runCompletion } = await import('./commands/completion.js');
      runCompletion(ctxOf(cmd), program, shell);
    });
  }
}
