/**
 * agentctl's program built for one run (src/cli/program.ts, `buildProgram` with the run's
 * arguments): only the named command is defined, and it is the very command of the whole tree.
 */
import type { Command } from 'commander';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../../src/cli/program.js';

const nullStream = (): NodeJS.WriteStream => new PassThrough() as unknown as NodeJS.WriteStream;
const io = { env: {}, cwd: '/', stdout: nullStream(), stderr: nullStream() };
const whole = buildProgram(io);
const names = (program: Command): string[] => program.commands.map((c) => c.name());

/** Everything a command shows or parses by: its help, options and arguments, its subcommands too. */
function shape(cmd: Command): unknown {
  return {
    help: cmd.helpInformation(),
    options: cmd.options.map((o) => [o.flags, o.description, o.hidden, o.defaultValue]),
    arguments: cmd.registeredArguments.map((a) => [a.name(), a.required, a.argChoices]),
    commands: cmd.commands.map(shape),
  };
}

describe('buildProgram for a run', () => {
  it.each(names(whole).filter((n) => n !== 'completion'))(
    '`agentctl %s …` defines only that command, the same as in the whole tree',
    (name) => {
      const program = buildProgram(io, [name, '--json']);
      expect(names(program)).toEqual([name]);
      const own = program.commands[0] as Command;
      expect(shape(own)).toEqual(shape(whole.commands.find((c) => c.name() === name) as Command));
      // The program itself (its options, usage) is unchanged.
      expect(program.options.map((o) => o.flags)).toEqual(whole.options.map((o) => o.flags));
    },
  );

  it.each([
    [['--socket', '/run/x.sock', '--timeout', '5s', 'status'], ['status']],
    [['--socket=/run/x.sock', '--json', 'ops', 'list'], ['ops']],
    [['--', 'drain'], ['drain']],
  ])('global options and their values before the command are skipped: %j', (args, defined) => {
    expect(names(buildProgram(io, args))).toEqual(defined);
  });

  it.each([
    [[]],
    [['--version']],
    [['help', 'status']],
    [['stauts']],
    [['completion', 'bash']],
    [['--json']],
  ])('the whole tree when no command is named, or for help, a typo or completion: %j', (args) => {
    expect(names(buildProgram(io, args))).toEqual(names(whole));
  });
});
