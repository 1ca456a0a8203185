/**
 * What shell completion needs to know, read from agentctl's commander tree: for every command
 * path, its subcommands, its options (which take a value, and their choices) and the choices of
 * its arguments. The scripts are generated from this, so they never drift from the commands.
 */
import { Help, type Command, type Option } from 'commander';

export interface CompletionOption {
  /** `--json`, `-V`… */
  names: string[];
  description: string;
  takesValue: boolean;
  /** Allowed values, when the option has a fixed set. */
  choices: string[];
}

export interface CompletionNode {
  /** Space-separated command path: '' for agentctl itself, 'ops list'. */
  path: string;
  description: string;
  subcommands: { name: string; description: string }[];
  options: CompletionOption[];
  /** Choices of the positional arguments (e.g. `completion bash|zsh|fish`). */
  argumentChoices: string[];
}

function optionSpec(o: Option): CompletionOption {
  return {
    names: [o.long, o.short].filter((n): n is string => Boolean(n)),
    description: o.description,
    takesValue: o.required || o.optional,
    choices: o.argChoices ?? [],
  };
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
        { names: ['--help', '-h'], description: 'show help', takesValue: false, choices: [] },
      ],
      argumentChoices: cmd.registeredArguments.flatMap((a) => a.argChoices ?? []),
    });
    for (const sub of visible) walk(sub, path ? `${path} ${sub.name()}` : sub.name());
  };
  walk(program, '');
  return nodes;
}
