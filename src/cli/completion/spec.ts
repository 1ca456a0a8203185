/**
 * What shell completion needs to know, read from agentctl's commander tree: for every command
 * path, its subcommands, its options (which take a value, their choices, whether it is a path)
 * and its arguments' choices and paths. The scripts are generated from this, so they never drift
 * from the commands.
 */
import { Help, type Argument, type Command, type Option } from 'commander';

/**
 * A value that names a path: completed with file names (`files`) or directory names
 * (`directories`). Read from the value's name in the usage: `<file>`, `<path>` and names ending
 * in `-file`/`-path` are files, `<dir>` and names ending in `-dir` directories; any other value
 * (`<duration>`, `<id>`) gets no file names.
 */
export type PathKind = 'files' | 'directories';

export function pathKind(valueName: string): PathKind | null {
  if (/(^|[-_])(file|path)$/i.test(valueName)) return 'files';
  if (/(^|[-_])dir$/i.test(valueName)) return 'directories';
  return null;
}

export interface CompletionOption {
  /** `--json`, `-V`… */
  names: string[];
  description: string;
  takesValue: boolean;
  /** Allowed values, when the option has a fixed set. */
  choices: string[];
  /** What completes the value when it is a path (`--config <file>`), else null. */
  path: PathKind | null;
}

export interface CompletionNode {
  /** Space-separated command path: '' for agentctl itself, 'ops list'. */
  path: string;
  description: string;
  subcommands: { name: string; description: string }[];
  options: CompletionOption[];
  /** Choices of the positional arguments (e.g. `completion bash|zsh|fish`). */
  argumentChoices: string[];
  /** What completes a positional argument that is a path, else null (no file names). */
  argumentPath: PathKind | null;
}

function optionSpec(o: Option): CompletionOption {
  const takesValue = o.required || o.optional;
  // The value's name as the usage shows it: `--config <file>` → file.
  const valueName = /[<[]([^>\]]+)[>\]]/.exec(o.flags)?.[1];
  return {
    names: [o.long, o.short].filter((n): n is string => Boolean(n)),
    description: o.description,
    takesValue,
    choices: o.argChoices ?? [],
    path: takesValue && valueName && !o.argChoices ? pathKind(valueName) : null,
  };
}

/** The first path kind among a command's arguments (file names beat directory names). */
function argumentPath(args: readonly Argument[]): PathKind | null {
  const kinds = args.filter((a) => !a.argChoices).map((a) => pathKind(a.name()));
  return kinds.includes('files') ? 'files' : kinds.includes('directories') ? 'directories' : null;
}

const help = new Help();

/**
 * Every command of the tree, depth first, with the global options offered everywhere but
 * `--version`, which only agentctl itself takes (after a command's name it is unknown).
 */
export function completionNodes(program: Command): CompletionNode[] {
  const globals = program.options.filter((o) => !o.hidden).map(optionSpec);
  const inheritable = globals.filter((g) => !g.names.includes('--version'));
  const nodes: CompletionNode[] = [];
  const walk = (cmd: Command, path: string): void => {
    // Help knows which commands are hidden; it also lists its implicit `help` command: not ours.
    const visible = help.visibleCommands(cmd).filter((c) => cmd.commands.includes(c));
    const own = cmd === program ? globals : cmd.options.filter((o) => !o.hidden).map(optionSpec);
    // A command's own option wins over the global of the same name (drain's --timeout).
    const ownNames = new Set(own.flatMap((o) => o.names));
    const inherited = cmd === program ? [] : inheritable.filter((g) => !g.names.some((n) => ownNames.has(n)));
    nodes.push({
      path,
      description: cmd.description(),
      subcommands: visible.map((c) => ({ name: c.name(), description: c.description() })),
      options: [
        ...own,
        ...inherited,
        { names: ['--help', '-h'], description: 'show help', takesValue: false, choices: [], path: null },
      ],
      argumentChoices: cmd.registeredArguments.flatMap((a) => a.argChoices ?? []),
      argumentPath: argumentPath(cmd.registeredArguments),
    });
    for (const sub of visible) walk(sub, path ? `${path} ${sub.name()}` : sub.name());
  };
  walk(program, '');
  return nodes;
}
