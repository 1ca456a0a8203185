/**
 * Render `docs/cli.md` from agentctl's commander tree: every command with its description,
 * usage, arguments, options and the examples added to its help text, plus the global options,
 * environment variables and the exit-code table. Only structured data is used (never the
 * wrapped help text), so the output does not depend on the terminal width.
 */
import type { EventEmitter } from 'node:events';
import { Help, type Argument, type Command, type Option } from 'commander';
import { CLI_ERROR_CODES, EXIT } from '../../src/cli/exit-codes.js';

/** What each exit code means to a script; keyed like EXIT so a new code cannot go undocumented. */
export const EXIT_MEANINGS: Record<keyof typeof EXIT, string> = {
  OK: 'success',
  FAILED:
    'the operation failed (or the daemon answered an error not listed below); also an answer that cannot be read (`BAD_ANSWER`), after which the change a command asked for may have been made (`mayHaveStarted`)',
  USAGE: 'usage error or invalid parameters (also INVALID_PARAMS, INVALID_CONFIG from the daemon)',
  UNREACHABLE:
    'the daemon is unreachable (no socket, connection refused, permission denied) or closed the connection without answering; after the request of a command that changes something went out (`update`, `reset`, `drain`, `uncordon`, `ops cancel`, `rpc` of a mutating method), the change may then have been made (`mayHaveStarted`)',
  BUSY: 'busy: another operation holds the node (BUSY)',
  TIMEOUT:
    'timed out: the daemon did not answer within --timeout (for `fleet pause` and `fleet resume`, the Kubernetes API server); for a command that changes something, the change may have been made (`mayHaveStarted`); or TIMEOUT from the daemon',
  RETRY:
    'try again: the daemon is still starting (startup recovery has not finished: UNAVAILABLE) or is shutting down (DRAINING); nothing was done',
  DETACHED:
    'interrupted (Ctrl-C, 128 + SIGINT): while following an operation, agentctl detached and the operation keeps running; before agentd answered the request of `update`, `reset`, `drain` or `uncordon`, agentctl waits for the answer to cancel what it started (or, for a reset or an uncordon, to name it); a second Ctrl-C stops waiting, and the operation may have started (`INTERRUPTED`)',
};

/** The `error.code` values agentctl gives itself with this exit code (src/cli/exit-codes.ts). */
export function errorCodesOf(exitCode: number): string[] {
  return Object.entries(CLI_ERROR_CODES)
    .filter(([, exit]) => exit === exitCode)
    .map(([code]) => code);
}

/** Environment variables agentctl reads; kept here because commander does not know them all. */
export const ENVIRONMENT: readonly [string, string][] = [
  ['AGENTD_SOCKET', 'the socket, when `--socket` is not given'],
  ['AGENTD_PID_FILE', 'the PID file of `agentctl stop`, when `--pid-file` is not given'],
  [
    'KUBECONFIG',
    'the kubeconfig files of `fleet pause` and `fleet resume` (merged as kubectl merges them), when `--kubeconfig` is not given; without either, `~/.kube/config` (`HOME`). No other command reads a kubeconfig',
  ],
  [
    'NO_COLOR',
    'set to a non-empty value to disable colors, like `--no-color` (an empty NO_COLOR is ignored)',
  ],
];

export const help = new Help();

/** Escape text for a markdown table cell. */
function cell(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function table(head: string[], rows: string[][]): string {
  return [
    `| ${head.join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}

/** The full command path, e.g. `agentctl ops list`. */
export function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** GitHub-style heading anchor for `### agentctl ops list`. */
function anchor(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, '')
    .replace(/ /g, '-');
}

/** Text added with `addHelpText` (before and after), captured by emitting commander's help events. */
export function addedHelpText(cmd: Command): { before: string; after: string } {
  // A Command is an EventEmitter at run time; commander's typings do not say so.
  const emitter = cmd as unknown as EventEmitter;
  const capture = (event: string): string => {
    let out = '';
    emitter.emit(event, { error: false, command: cmd, write: (s: string) => (out += s) });
    return out;
  };
  return { before: capture('beforeHelp'), after: capture('afterHelp') };
}

/**
 * Render added help text: a `Examples:` block whose lines start with `$ ` becomes a shell code
 * block; anything else is kept as a paragraph.
 */
function renderAddedText(text: string): string[] {
  const out: string[] = [];
  let code: string[] = [];
  let prose: string[] = [];
  const flush = (): void => {
    if (prose.length > 0) out.push(prose.join(' '), '');
    if (code.length > 0) out.push('```sh', ...code, '```', '');
    prose = [];
    code = [];
  };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith('$ ')) {
      if (prose.length > 0 && code.length === 0) flush();
      code.push(line.slice(2));
    } else if (/^[A-Z][A-Za-z ]*:$/.test(line)) {
      flush();
      out.push(`**${line.slice(0, -1)}**`, '');
    } else {
      if (code.length > 0) flush();
      prose.push(line);
    }
  }
  flush();
  return out;
}

function renderArguments(args: readonly Argument[]): string[] {
  if (args.length === 0) return [];
  const rows = args.map((a) => [
    `\`${help.argumentTerm(a)}\``,
    a.required ? 'yes' : 'no',
    cell(help.argumentDescription(a)),
  ]);
  return ['**Arguments**', '', table(['argument', 'required', 'description'], rows), ''];
}

function renderOptions(title: string, options: readonly Option[]): string[] {
  if (options.length === 0) return [];
  const rows = options.map((o) => [`\`${help.optionTerm(o)}\``, cell(help.optionDescription(o))]);
  return [`**${title}**`, '', table(['option', 'description'], rows), ''];
}

/** Commands in help order, without commander's implicit `help` command. */
export function subcommands(cmd: Command): Command[] {
  return help.visibleCommands(cmd).filter((c) => cmd.commands.includes(c));
}

function renderCommand(cmd: Command, level: number): string[] {
  const title = commandPath(cmd);
  const added = addedHelpText(cmd);
  const out = [
    `${'#'.repeat(level)} ${title}`,
    '',
    ...(cmd.description() ? [cmd.description(), ''] : []),
    ...renderAddedText(added.before),
    '```text',
    help.commandUsage(cmd),
    '```',
    '',
    ...renderArguments(help.visibleArguments(cmd)),
    ...renderOptions(
      'Options',
      help.visibleOptions(cmd).filter((o) => o.long !== '--help'),
    ),
    ...renderAddedText(added.after),
  ];
  for (const sub of subcommands(cmd)) out.push(...renderCommand(sub, Math.min(level + 1, 6)));
  return out;
}

function renderExitCodes(): string[] {
  const rows = (Object.keys(EXIT) as (keyof typeof EXIT)[])
    .sort((a, b) => EXIT[a] - EXIT[b])
    .map((k) => [
      `\`${EXIT[k]}\``,
      `\`${k}\``,
      cell(EXIT_MEANINGS[k]),
      errorCodesOf(EXIT[k])
        .map((c) => `\`${c}\``)
        .join(', '),
    ]);
  return [
    '## Exit codes',
    '',
    table(['code', 'name', 'meaning', '`error.code` (agentctl)'], rows),
    '',
    'With `--json`, a failure prints `{"error": {"code": ..., "message": ..., "exitCode": ...}}`: `error.code` is one of the codes above, which agentctl gives itself, or the code the daemon answered. [errors.md](errors.md) says what each one means.',
    '',
  ];
}

/** Render the whole CLI reference for a commander program (agentctl's `buildProgram`). */
export function renderCliDoc(program: Command): string {
  const commands = subcommands(program);
  const lines = [
    `# ${program.name()} command reference`,
    '',
    '<!-- Generated by scripts/generate.ts from src/cli/program.ts; do not edit. Run: npm run generate -->',
    '',
    program.description(),
    '',
    '```text',
    help.commandUsage(program),
    '```',
    '',
    `Every command takes the global options. With \`--json\` a command prints exactly one JSON value on stdout (also on failure: \`{"error": {...}}\`) and progress, if any, on stderr. Run \`${program.name()} help COMMAND\` for the same information in the terminal.`,
    '',
    ...renderOptions('Global options', help.visibleOptions(program)).map((l) =>
      l === '**Global options**' ? '## Global options' : l,
    ),
    '## Environment',
    '',
    table(
      ['variable', 'meaning'],
      ENVIRONMENT.map(([name, meaning]) => [`\`${name}\``, cell(meaning)]),
    ),
    '',
    ...renderExitCodes(),
    '## Commands',
    '',
    ...commands.map((c) => {
      const title = commandPath(c);
      return `- [\`${title}\`](#${anchor(title)}): ${c.description()}`;
    }),
    '',
    ...commands.flatMap((c) => renderCommand(c, 3)),
  ];
  // One blank line between blocks and exactly one newline at the end.
  return `${lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`;
}
