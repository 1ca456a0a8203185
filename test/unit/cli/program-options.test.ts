import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { CliError } from '../../../src/cli/exit-codes.js';
import {
  durationArg,
  globalOptions,
  globalValues,
  positiveIntArg,
  withGlobals,
} from '../../../src/cli/program-options.js';

/** A program shaped like agentctl's: positional globals, copies on leaves, drain's own --timeout. */
function parse(args: string[]) {
  const seen: Record<string, unknown> = {};
  const program = new Command('x').enablePositionalOptions().exitOverride();
  for (const o of globalOptions(true)) program.addOption(o);
  withGlobals(program.command('status')).action((_o, cmd: Command) => {
    Object.assign(seen, { globals: globalValues(cmd) });
  });
  withGlobals(program.command('drain').option('--timeout <d>', 'drain timeout'), ['timeout']).action(
    (o: { timeout?: string }, cmd: Command) => {
      Object.assign(seen, { globals: globalValues(cmd), own: o.timeout });
    },
  );
  program.parse(args, { from: 'user' });
  return seen as { globals: Record<string, unknown>; own?: string };
}

describe('global options', () => {
  it('are taken before and after the command name', () => {
    expect(parse(['--json', 'status']).globals).toMatchObject({ json: true });
    expect(parse(['status', '--json', '--socket', '/s']).globals).toMatchObject({ json: true, socket: '/s' });
    expect(parse(['status', '--no-color']).globals).toMatchObject({ color: false });
    expect(parse(['status']).globals).toMatchObject({ color: true });
  });

  it('after the command, they win over the ones before it', () => {
    expect(parse(['--socket', '/a', 'status', '--socket', '/b']).globals.socket).toBe('/b');
  });

  it("a command's own option of a global's name is its own (drain --timeout)", () => {
    const r = parse(['--timeout', '2s', 'drain', '--timeout', '5m']);
    expect(r.own).toBe('5m');
    expect(r.globals.timeout).toBe(2000);
    expect(parse(['drain', '--timeout', '5m']).globals.timeout).toBeUndefined();
  });

  it('the copies are hidden from help, the originals are not', () => {
    expect(globalOptions(true).every((o) => !o.hidden)).toBe(true);
    expect(globalOptions(false).every((o) => o.hidden)).toBe(true);
  });
});

describe('value parsers', () => {
  it('durations: positive, with a message naming the flag', () => {
    expect(durationArg('--grace')('1m')).toBe(60_000);
    for (const bad of ['soon', '0', '-1s', '']) {
      expect(() => durationArg('--grace')(bad)).toThrow(CliError);
      expect(() => durationArg('--grace')(bad)).toThrow(/--grace: expected a duration/);
    }
  });

  it('whole numbers in a range', () => {
    expect(positiveIntArg('--limit', 10)('7')).toBe(7);
    for (const bad of ['0', '11', '1.5', 'x', '-2'])
      expect(() => positiveIntArg('--limit', 10)(bad)).toThrow(
        /--limit: expected a whole number from 1 to 10/,
      );
  });
});
