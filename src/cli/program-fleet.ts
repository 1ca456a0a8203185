/** agentctl commands about the fleet gate: fleet status, pause and resume (docs/fleet.md). */
import type { Command } from 'commander';
import { example, withGlobals, type ContextOf, type Want } from './program-options.js';

export function defineFleetCommands(program: Command, ctxOf: ContextOf, want: Want): void {
  if (want('fleet')) {
    // The group takes the global options too: `agentctl fleet --json status`.
    const fleet = example(
      withGlobals(
        program
          .command('fleet')
          .description('the fleet rollout gate: status, pause and resume (docs/fleet.md)'),
      ),
      ['agentctl fleet status', 'agentctl fleet pause'],
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

    example(
      withGlobals(
        fleet
          .command('pause')
          .description(
            'pause the whole fleet: running updates finish, no new one starts (sets paused: true)',
          ),
      ),
      ['agentctl fleet pause'],
    ).action(async (_opts, cmd: Command) => {
      const { runFleetPause } = await import('./commands/fleet.js');
      await runFleetPause(ctxOf(cmd));
    });

    example(
      withGlobals(
        fleet
          .command('resume')
          .description('clear the recorded failures (ends a halt) and set paused: false'),
      ),
      ['agentctl fleet resume', 'agentctl fleet resume --json | jq .clearedFailures'],
    ).action(async (_opts, cmd: Command) => {
      const { runFleetResume } = await import('./commands/fleet.js');
      await runFleetResume(ctxOf(cmd));
    });
  }
}
