/** `agentctl reset`: tear the node's machines down (after confirmation) and follow it. */
import { confirmOrRefuse } from '../confirm.js';
import type { CliContext } from '../context.js';
import { followAndReport, guardInterrupt } from '../follow/follow-command.js';
import { startOperation } from '../follow/start-operation.js';

export async function runReset(
  ctx: CliContext,
  flags: { yes?: boolean; stderr: NodeJS.WritableStream },
): Promise<void> {
  await confirmOrRefuse(ctx, {
    yes: Boolean(flags.yes),
    command: 'reset',
    question:
      'Stop and remove both machines (kube1, kube2), their nspawn files and applied configs? The node stops serving.',
    stderr: flags.stderr,
  });
  const interrupt = guardInterrupt(ctx);
  try {
    const op = await startOperation(ctx, { kind: 'reset', params: { wait: false } }, interrupt);
    await followAndReport(ctx, op, { interrupt });
  } finally {
    interrupt.dispose();
  }
}
