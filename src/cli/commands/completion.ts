/** `agentctl completion bash|zsh|fish`: print the completion script (always raw text, even with --json). */
import type { Command } from 'commander';
import { completionScript } from '../completion/scripts.js';
import type { Shell } from '../completion/shells.js';
import { completionNodes } from '../completion/spec.js';
import type { CliContext } from '../context.js';

export function runCompletion(ctx: CliContext, program: Command, shell: Shell): void {
  const script = completionScript(shell, completionNodes(program));
  // A script is the output here; --json wraps it so that stdout stays one JSON value.
  ctx.out.result({ shell, script }, () => script.trimEnd());
}
