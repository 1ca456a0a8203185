/** `agentctl update`: start an update and follow it to its end (or print the plan, or detach). */
import { RpcError } from '../../rpc/client.js';
import { readConfigFile } from '../config-file.js';
import type { CliContext } from '../context.js';
import { CliError, EXIT } from '../exit-codes.js';
import {
  followAndReport,
  guardInterrupt,
  resumeCommand,
  type InterruptGuard,
} from '../follow/follow-command.js';
import { renderOperation, renderPlan } from '../render/operation.js';
import { isFinal, type Operation } from '../types.js';

export interface UpdateFlags {
  config?: string;
  kubernetesVersion?: string;
  image?: string;
  force?: boolean;
  drain?: boolean;
  dryRun?: boolean;
  detach?: boolean;
}

/** Which flag set a params field, so the daemon's complaint names what the user typed. */
const FLAG_OF: Record<string, string> = {
  'set.kubernetesVersion': '--kubernetes-version',
  'set.image': '--image',
  set: '--kubernetes-version/--image',
};

async function buildParams(ctx: CliContext, flags: UpdateFlags): Promise<Record<string, unknown>> {
  const set: Record<string, string> = {};
  if (flags.kubernetesVersion !== undefined) set.kubernetesVersion = flags.kubernetesVersion;
  if (flags.image !== undefined) set.image = flags.image;
  if (flags.config !== undefined && Object.keys(set).length > 0) {
    throw new CliError(
      EXIT.USAGE,
      '--config cannot be combined with --kubernetes-version or --image: put those in the config file',
    );
  }
  return {
    ...(flags.config !== undefined ? { config: await readConfigFile(flags.config, ctx.cwd) } : {}),
    ...(Object.keys(set).length > 0 ? { set } : {}),
    force: Boolean(flags.force),
    drain: Boolean(flags.drain),
    dryRun: Boolean(flags.dryRun),
    wait: false,
  };
}

function withFlagNames(err: unknown, usedConfigFile: boolean): unknown {
  if (!(err instanceof RpcError) || err.appCode !== 'INVALID_PARAMS') return err;
  const issues = Array.isArray(err.data.issues) ? (err.data.issues as { path?: string }[]) : [];
  const first = issues[0]?.path ?? '';
  const flag = first.startsWith('config') && usedConfigFile ? '--config' : FLAG_OF[first];
  if (!flag) return err;
  return new CliError(EXIT.USAGE, `${flag}: ${err.message}`, { code: err.appCode, ...err.data });
}

export async function runUpdate(ctx: CliContext, flags: UpdateFlags): Promise<void> {
  const params = await buildParams(ctx, flags);
  const interrupt = guardInterrupt(ctx);
  try {
    await startAndReport(ctx, flags, params, interrupt);
  } finally {
    interrupt.dispose();
  }
}

async function startAndReport(
  ctx: CliContext,
  flags: UpdateFlags,
  params: Record<string, unknown>,
  interrupt: InterruptGuard,
): Promise<void> {
  let op: Operation;
  try {
    op = await ctx.callUntyped<Operation>('update', params);
  } catch (err) {
    throw withFlagNames(err, flags.config !== undefined);
  }
  const now = (): number => ctx.proc.clock.now();
  if (flags.dryRun) {
    ctx.out.result(op, () => renderPlan(op));
    return;
  }
  if (isFinal(op)) {
    // Nothing to follow: a no-op (same config), or the operation of an idempotency key seen before.
    return followAndReport(ctx, op, { interrupt });
  }
  if (flags.detach) {
    ctx.out.result(op, () =>
      [
        renderOperation(op, ctx.out.paint, now()).split('\n')[0],
        `follow it with: ${resumeCommand(ctx, op.id)}`,
      ].join('\n'),
    );
    return;
  }
  await followAndReport(ctx, op, { interrupt });
}
