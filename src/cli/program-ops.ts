/** agentctl commands about operations and configuration: ops *, config show, preflight. */
import { Option, type Command } from 'commander';
import {
  durationArg,
  example,
  positiveIntArg,
  withGlobals,
  type ContextOf,
  type Want,
} from './program-options.js';
import type { OperationState } from './types.js';

const STATES = ['pending', 'running', 'succeeded', 'failed', 'rolled_back', 'cancelled', 'interrupted'];

export function defineOpsCommands(program: Command, ctxOf: ContextOf, want: Want): void {
  if (want('ops')) {
    // The group takes the global options too: `agentctl ops --json list` as `agentctl ops list --json`.
    const ops = example(
      withGlobals(program.command('ops').description('operations: list, show, follow and cancel them')),
      ['agentctl ops list', 'agentctl ops wait op-0mwq9t3rs-f925146a'],
    );

    example(
      withGlobals(
        ops
          .command('list')
          .description('operations, newest first')
          .addOption(
            new Option('--limit <n>', 'at most this many')
              .default(20)
              .argParser(positiveIntArg('--limit', 1000)),
          )
          .addOption(new Option('--state <state>', 'only operations in this state').choices(STATES)),
      ),
      ['agentctl ops list --limit 5', "agentctl ops list --state failed --json | jq -r '.operations[].id'"],
    ).action(async (opts: { limit?: number; state?: OperationState }, cmd: Command) => {
      const { runOpsList } = await import('./commands/ops.js');
      await runOpsList(ctxOf(cmd), opts);
    });

    example(
      withGlobals(ops.command('get').description('one operation in detail').argument('<id>', 'operation id')),
      [
        'agentctl ops get op-0mwq9t3rs-f925146a',
        "agentctl ops get op-0mwq9t3rs-f925146a --json | jq '.phases'",
      ],
    ).action(async (id: string, _opts, cmd: Command) => {
      const { runOpsGet } = await import('./commands/ops.js');
      await runOpsGet(ctxOf(cmd), id);
    });

    example(
      withGlobals(
        ops
          .command('wait')
          .description(
            'follow an operation with progress until it ends (exit 0 succeeded, 1 otherwise, 5 at --timeout)',
          )
          .argument('<id>', 'operation id')
          .addOption(
            new Option(
              '--timeout <duration>',
              'stop following after this long (the operation goes on)',
            ).argParser(durationArg('--timeout')),
          ),
        ['timeout'],
      ),
      [
        'agentctl ops wait op-0mwq9t3rs-f925146a',
        'agentctl ops wait op-0mwq9t3rs-f925146a --timeout 10m --json',
      ],
    ).action(async (id: string, opts: { timeout?: number }, cmd: Command) => {
      const { runOpsWait } = await import('./commands/ops.js');
      await runOpsWait(ctxOf(cmd), id, opts);
    });

    example(
      withGlobals(
        ops
          .command('cancel')
          .description('cancel a running operation; refused once the switch-over has begun')
          .argument('<id>', 'operation id'),
      ),
      ['agentctl ops cancel op-0mwq9t3rs-f925146a'],
    ).action(async (id: string, _opts, cmd: Command) => {
      const { runOpsCancel } = await import('./commands/ops.js');
      await runOpsCancel(ctxOf(cmd), id);
    });
  }

  if (want('config')) {
    const config = example(withGlobals(program.command('config').description('the agent config')), [
      'agentctl config show',
    ]);
    example(
      withGlobals(
        config.command('show').description('the applied config of the active machine, secrets redacted'),
      ),
      ['agentctl config show', "agentctl config show --json | jq -r '.config.Cluster.Version'"],
    ).action(async (_opts, cmd: Command) => {
      const { runConfigShow } = await import('./commands/config-show.js');
      await runConfigShow(ctxOf(cmd));
    });
  }

  if (want('preflight')) {
    example(
      withGlobals(
        program
          .command('preflight')
          .description(
            'run the preflight checks of an update without changing anything (exit 1 when a check fails)',
          )
          .option(
            '--config <file>',
            'check this agent config (JSON or YAML) instead of the one an update would apply',
          )
          .option('--kubernetes-version <version>', 'check the update to this Kubernetes version')
          .option('--image <ref>', 'check the update to this OCI rootfs image'),
      ),
      [
        'agentctl preflight',
        'agentctl preflight --kubernetes-version 1.35.0',
        'agentctl preflight --config ./agent-config.yaml --json | jq .ok',
      ],
    ).action(async (opts: { config?: string; kubernetesVersion?: string; image?: string }, cmd: Command) => {
      const { runPreflight } = await import('./commands/preflight.js');
      await runPreflight(ctxOf(cmd), opts);
    });
  }
}
