/**
 * Shared pieces of agentctl's command definitions: value parsers that fail with exit 2 naming
 * the flag, examples in help, and the global options every command also accepts after its name.
 */
import { Option, type Command } from 'commander';
import { formatDuration, parseDuration } from '../config/duration.js';
import { NAMESPACE_NAME_EXPECTED, NAMESPACE_NAME_RE } from '../config/fleet-namespace.js';
import {
  DEFAULT_CALL_TIMEOUT_MS,
  STATUS_CHECK_TIMEOUT_MS,
  type CliContext,
  type CliProcess,
} from './context.js';
import { CliError, EXIT } from './exit-codes.js';
import { socketPathProblem } from './paths.js';

/** Where agentctl reads and writes (the real process by default); shared by every command file. */
export interface ProgramIo {
  env: NodeJS.ProcessEnv;
  cwd: string;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  /** stdin, clock and Ctrl-C (default: the real process). */
  proc?: CliProcess;
}

/** Whether to define the top-level command `name` (src/cli/program.ts, `buildProgram`). */
export type Want = (name: string) => boolean;

/** Builds the context of the command that runs (global options resolved). */
export type ContextOf = (cmd: Command) => CliContext;

/**
 * The longest duration a flag takes: the longest delay a timer can wait (2^31 - 1 ms, about 24.8
 * days). A longer one would not wait at all: the timer would fire at once.
 */
export const MAX_DURATION_MS = 2 ** 31 - 1;
/** MAX_DURATION_MS in whole hours, as messages and docs say it. */
const MAX_DURATION_TEXT = `${Math.floor(MAX_DURATION_MS / 3_600_000)}h`;

export function durationArg(flag: string) {
  return (value: string): number => {
    const ms = parseDuration(value);
    if (ms === null || ms <= 0)
      throw new CliError(
        EXIT.USAGE,
        `${flag}: expected a duration such as 5s or 2m, got ${JSON.stringify(value)}`,
        { code: 'USAGE', option: flag },
      );
    if (ms > MAX_DURATION_MS)
      throw new CliError(
        EXIT.USAGE,
        `${flag}: ${JSON.stringify(value)} is too long: at most ${MAX_DURATION_TEXT} (${MAX_DURATION_MS} ms)`,
        { code: 'USAGE', option: flag, maxMs: MAX_DURATION_MS },
      );
    return ms;
  };
}

export function positiveIntArg(flag: string, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n < 1 || n > max)
      throw new CliError(
        EXIT.USAGE,
        `${flag}: expected a whole number from 1 to ${max}, got ${JSON.stringify(value)}`,
        { code: 'USAGE', option: flag },
      );
    return n;
  };
}

/** `--socket`: a path a unix socket can have. */
export function socketArg(flag: string) {
  return (value: string): string => {
    const problem = socketPathProblem(value);
    if (problem !== null)
      throw new CliError(EXIT.USAGE, `${flag} ${JSON.stringify(value)} ${problem}`, {
        code: 'USAGE',
        option: flag,
      });
    return value;
  };
}

/** `--fleet-namespace`: a Kubernetes namespace name, as agentd's own flag takes it. */
export function namespaceArg(flag: string) {
  return (value: string): string => {
    if (!NAMESPACE_NAME_RE.test(value))
      throw new CliError(EXIT.USAGE, `${flag}: ${NAMESPACE_NAME_EXPECTED}, got ${JSON.stringify(value)}`, {
        code: 'USAGE',
        option: flag,
      });
    return value;
  };
}

/** Add an "Examples:" block to a command's help (docs/cli.md renders it as a code block). */
export function example(cmd: Command, lines: string[]): Command {
  return cmd.addHelpText('after', `\nExamples:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`);
}

/** Names of the global options (attribute names as commander stores them). */
export type GlobalKey = 'socket' | 'json' | 'timeout' | 'color';

/** The global options, defined once; `root` is agentctl itself, otherwise a hidden copy for a command. */
export function globalOptions(root: boolean): Option[] {
  const hide = (o: Option): Option => (root ? o : o.hideHelp());
  return [
    hide(
      new Option(
        '--socket <path>',
        'agentd socket (env AGENTD_SOCKET; default /run/agentd/agentd.sock, or ./.agentd/agentd.sock when only that exists)',
      ).argParser(socketArg('--socket')),
    ),
    hide(new Option('--json', 'machine output: one JSON value on stdout; progress on stderr')),
    hide(
      new Option(
        '--timeout <duration>',
        `give up on a daemon call after this long (default ${formatDuration(DEFAULT_CALL_TIMEOUT_MS)}; ${formatDuration(STATUS_CHECK_TIMEOUT_MS)} for the status check of stop, uninstall and version; following an operation has no limit)`,
      ).argParser(durationArg('--timeout')),
    ),
    hide(new Option('--no-color', 'no colors (also NO_COLOR)')),
  ];
}

/**
 * Let a command accept the global options after its name too (`agentctl status --json`); a
 * group gets them as well as its subcommands (`agentctl ops --json list`, `agentctl ops list --json`).
 * The program parses positionally (its options only before the command), so that a command may
 * have its own option of a global's name — `drain --timeout` is the drain timeout, not the RPC
 * one — and these hidden copies are what makes the usual order work everywhere else.
 */
export function withGlobals(cmd: Command, except: GlobalKey[] = []): Command {
  for (const o of globalOptions(false)) {
    if (!except.includes(o.attributeName() as GlobalKey)) cmd.addOption(o);
  }
  GLOBAL_COPIES.add(cmd);
  return cmd;
}

/** Commands carrying hidden copies of the global options (see `globalValues`). */
const GLOBAL_COPIES = new WeakSet<Command>();

/**
 * The global options of a run: agentctl's own, overridden by the copies each command on the
 * way to the one that runs got on its command line (given after its name; the nearest wins). A command's own option of a global's
 * name (drain's `--timeout`) is not a copy and is not taken.
 */
export function globalValues(cmd: Command): Partial<Record<GlobalKey, unknown>> {
  const chain: Command[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) chain.unshift(c);
  const values: Partial<Record<GlobalKey, unknown>> = { ...chain[0]?.opts() };
  for (const c of chain.slice(1)) {
    if (!GLOBAL_COPIES.has(c)) continue;
    for (const o of c.options) {
      const key = o.attributeName() as GlobalKey;
      if (!o.hidden || !['socket', 'json', 'timeout', 'color'].includes(key)) continue;
      if (c.getOptionValueSource(key) === 'cli') values[key] = c.getOptionValue(key);
    }
  }
  return values;
}
