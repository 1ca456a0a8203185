/** agentctl commands about the node: status, update, reset, drain, uncordon. */
import { Option, type Command } from 'commander';
import {
  durationArg,
  example,
  withGlobals,
  type ContextOf,
  type ProgramIo,
  type Want,
} from './program-options.js';

export function defineNodeCommands(program: Command, ctxOf: ContextOf, io: ProgramIo, want: Want): void {
  if (want('status')) {
    example(
      withGlobals(
        program.command('status').description('daemon, node, machines, and the current and last operation'),
      ),
      ['agentctl status', "agentctl status --json | jq -r '.node.activeMachine'"],
    ).action(async (_opts, cmd: Command) => {
      const { runStatus } = await import('./commands/status.js');
      await runStatus(ctxOf(cmd));
    });
  }

  if (want('update')) {
    example(
      withGlobals(
        program
          .command('update')
          .description(
            'start an update and follow its progress until it ends (exit 0 succeeded, 1 failed or rolled back, 4 busy)',
          )
          .option('--config <file>', 'a full agent config (JSON or YAML, PascalCase keys) to apply')
          .option('--kubernetes-version <version>', 'change the Kubernetes version of the applied config')
          .option('--image <ref>', 'change the OCI rootfs image of the applied config')
          .option('--force', 'provision a fresh machine even when nothing changed (repave)')
          .option('--drain', 'cordon and drain the node before the switch-over; uncordon after')
          .option(
            '--ignore-fleet',
            'do not wait in the fleet gate (no slot, window, pause or halt check; docs/fleet.md)',
          )
          .option('--dry-run', 'print the plan; change nothing')
          .option('--detach', 'print the operation id and return at once instead of following'),
      ),
      [
        'agentctl update --kubernetes-version 1.35.0',
        'agentctl update --config ./agent-config.yaml --drain',
        'id=$(agentctl update --force --detach)   # the operation id alone on stdout',
        'agentctl update --image registry.example/agent-ubuntu2404:v2 --dry-run',
      ],
    ).action(async (opts: Record<string, string | boolean | undefined>, cmd: Command) => {
      const { runUpdate } = await import('./commands/update.js');
      await runUpdate(ctxOf(cmd), opts);
    });
  }

  if (want('reset')) {
    example(
      withGlobals(
        program
          .command('reset')
          .description(
            "tear the node's machines down: stop and remove kube1 and kube2, their files and applied configs",
          )
          .option('--yes', 'do not ask for confirmation (required when not on a terminal)'),
      ),
      ['agentctl reset', 'agentctl reset --yes --json'],
    ).action(async (opts: { yes?: boolean }, cmd: Command) => {
      const { runReset } = await import('./commands/reset.js');
      await runReset(ctxOf(cmd), { yes: opts.yes, stderr: io.stderr });
    });
  }

  if (want('drain')) {
    example(
      withGlobals(
        program
          .command('drain')
          .description(
            'cordon the node and evict its pods through the Eviction API (PDB-aware), following progress',
          )
          .addOption(
            new Option(
              '--timeout <duration>',
              'give up evicting after this long (the daemon default otherwise)',
            ).argParser(durationArg('--timeout')),
          )
          .option('--force', 'also evict pods that no controller manages')
          .option('--ignore-daemonsets', 'skip DaemonSet pods instead of refusing')
          .option('--delete-emptydir-data', 'evict pods with emptyDir volumes (their data is lost)')
          .option('--dry-run', 'list what would be evicted; change nothing'),
        ['timeout'],
      ),
      ['agentctl drain --ignore-daemonsets --timeout 5m', 'agentctl drain --dry-run --json | jq .result'],
    ).action(async (opts: Record<string, number | boolean | undefined>, cmd: Command) => {
      const { runDrain } = await import('./commands/drain.js');
      await runDrain(ctxOf(cmd), opts);
    });
  }

  if (want('uncordon')) {
    example(
      withGlobals(
        program
          .command('uncordon')
          .description('make the node schedulable again (undoes only a cordon agentd made, unless --force)')
          .option('--force', "also undo a cordon agentd did not make (an administrator's)"),
      ),
      ['agentctl uncordon'],
    ).action(async (opts: { force?: boolean }, cmd: Command) => {
      const { runUncordon } = await import('./commands/drain.js');
      await runUncordon(ctxOf(cmd), opts);
    });
  }
}
