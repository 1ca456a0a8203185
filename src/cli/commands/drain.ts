/**
 * `agentctl drain` / `agentctl uncordon`: node drain through the Eviction API, and making the
 * node schedulable again. Both are operations, followed like an update.
 */
import type { CliContext } from '../context.js';
import { followAndReport, guardInterrupt } from '../follow/follow-command.js';
import { startOperation, type StartedKind } from '../follow/start-operation.js';

/** Params of the `drain` method (docs/api.md). */
export interface DrainParams {
  timeoutSeconds?: number;
  force: boolean;
  ignoreDaemonSets: boolean;
  deleteEmptyDirData: boolean;
  dryRun: boolean;
  wait: boolean;
}

export interface DrainFlags {
  timeout?: number;
  force?: boolean;
  ignoreDaemonsets?: boolean;
  deleteEmptydirData?: boolean;
  dryRun?: boolean;
}

export function drainParams(flags: DrainFlags): DrainParams {
  return {
    ...(flags.timeout !== undefined ? { timeoutSeconds: Math.max(1, Math.ceil(flags.timeout / 1000)) } : {}),
    force: Boolean(flags.force),
    ignoreDaemonSets: Boolean(flags.ignoreDaemonsets),
    deleteEmptyDirData: Boolean(flags.deleteEmptydirData),
    dryRun: Boolean(flags.dryRun),
    wait: false,
  };
}

// Both go through callUntyped (startOperation): an agentd older than these methods is then
// reported by name.
export async function runDrain(ctx: CliContext, flags: DrainFlags): Promise<void> {
  const params = drainParams(flags);
  await startAndFollow(ctx, 'drain', { ...params }, params.dryRun);
}

export async function runUncordon(ctx: CliContext, flags: { force?: boolean }): Promise<void> {
  await startAndFollow(ctx, 'uncordon', { force: Boolean(flags.force), wait: false });
}

async function startAndFollow(
  ctx: CliContext,
  kind: Extract<StartedKind, 'drain' | 'uncordon'>,
  params: Record<string, unknown>,
  dryRun = false,
): Promise<void> {
  const interrupt = guardInterrupt(ctx);
  try {
    const op = await startOperation(ctx, { kind, params, dryRun }, interrupt);
    await followAndReport(ctx, op, { interrupt });
  } finally {
    interrupt.dispose();
  }
}
