/** agentctl commands about the fleet gate: fleet status, pause and resume (docs/fleet.md). */
import { Option, type Command } from 'commander';
import { DEFAULT_FLEET_NAMESPACE } from '../config/fleet-namespace.js';
import type { OperatorFlags } from './commands/fleet.js';
import { example, namespaceArg, withGlobals, type ContextOf, type Want } from './program-options.js';

/**
 * What pause and resume say of their credentials: unlike every other command, they do not go
 * through agentd (whose node credentials may not edit the policy), but act with the operator's
 * kubeconfig (docs/fleet.md, "Pause, halt and resume").
 */
const OPERATOR_HELP = `
Credentials:
  This command acts as you, not through agentd: a node's credentials may not pause or
  resume the fleet. It changes the fleet's ConfigMaps with the operator's kubeconfig:
  --kubeconfig, else the files in KUBECONFIG, else ~/.kube/config, as kubectl finds it
  (--context instead of its current-context). Only fleet pause and resume read a
  kubeconfig; every other command talks to agentd on its socket (--socket is not used
  here). --timeout bounds the whole change. It needs the rights of the Role
  agentd-fleet-operator (deploy/rbac.yaml, group agentd:fleet-operators).
`;

/** The options of the operator's commands (pause, resume). */
function withOperatorOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option(
        '--kubeconfig <path>',
        "the operator's kubeconfig (default: KUBECONFIG, else ~/.kube/config, as kubectl)",
      ),
    )
    .addOption(new Option('--context <name>', 'the kubeconfig context to use (default: its current-context)'))
    .addOption(
      new Option('--fleet-namespace <namespace>', "the fleet's namespace, as agentd's --fleet-namespace")
        .default(DEFAULT_FLEET_NAMESPACE)
        .argParser(namespaceArg('--fleet-namespace')),
    );
}

export function defineFleetCommands(program: Command, ctxOf: ContextOf, want: Want): void {
  if (want('fleet')) {
    // The group takes the global options too: `agentctl fleet --json status`.
    const fleet = example(
      withGlobals(
        program
          .command('fleet')
          .description('the fleet rollout gate: status, pause and resume (docs/fleet.md)'),
      ),
      ['agentctl fleet status', 'agentctl fleet pause --kubeconfig ~/.kube/config'],
    );

    example(
      withGlobals(
        fleet
          .command('status')
          .description(
            'policy, slots and their holders, windows, pause, halt and recorded failures (exit 1 when part of it cannot be read from the API server)',
          ),
      ),
      ['agentctl fleet status', "agentctl fleet status --json | jq '.slots[] | {name, holder}'"],
    ).action(async (_opts, cmd: Command) => {
      const { runFleetStatus } = await import('./commands/fleet.js');
      await runFleetStatus(ctxOf(cmd));
    });

    for (const action of ['pause', 'resume'] as const) {
      const cmd = withOperatorOptions(
        fleet
          .command(action)
          .description(
            action === 'pause'
              ? 'pause the whole fleet: running updates finish, no new one starts (sets paused: true); as an operator, with your kubeconfig'
              : 'clear the recorded failures (ends a halt) and set paused: false; as an operator, with your kubeconfig',
          ),
      );
      example(
        withGlobals(cmd.addHelpText('after', OPERATOR_HELP)),
        action === 'pause'
          ? [
              'agentctl fleet pause',
              'agentctl fleet pause --kubeconfig ~/.kube/prod.yaml --context prod-admin',
              'KUBECONFIG=~/ops.yaml agentctl fleet pause --fleet-namespace pool-b',
            ]
          : ['agentctl fleet resume', 'agentctl fleet resume --json | jq .clearedFailures'],
      ).action(async (opts: OperatorFlags, c: Command) => {
        const { runFleetOperator } = await import('./commands/fleet.js');
        await runFleetOperator(ctxOf(c), action, opts);
      });
    }
  }
}
