/** `agentctl update`: start an update and follow it to its end (or print the plan, or detach). */
import { RpcError } from '../../rpc/client.js';
import { readConfigFile } from '../config-file.js';
import type { CliContext } from '../context.js';
import { CliError, CliExit, EXIT } from '../exit-codes.js';
import {
  followAndReport,
  guardInterrupt,
  resumeCommand,
  type InterruptGuard,
} from '../follow/follow-command.js';
import { startOperation } from '../follow/start-operation.js';
import { firstLine } from '../output.js';
import { renderOperation, renderPlan } from '../render/operation.js';
import { isFinal, type Operation } from '../types.js';

export interface UpdateFlags {
  config?: string;
  kubernetesVersion?: string;
  image?: string;
  force?: boolean;
  drain?: boolean;
  ignoreFleet?: boolean;
  dryRun?: boolean;
  detach?: boolean;
}

/** Which flag set a params field, so the daemon's complaint names what the user typed. */
const FLAG_OF: Record<string, string> = {
  'set.kubernetesVersion': '--kubernetes-version',
  'set.image': '--image',
  set: '--kubernetes-version/--image',
};

/**
 * The target of `update` and `preflight` as params: `config` (read from the --config file) or
 * `set` (from --kubernetes-version/--image), never both.
 */
export async function targetParams(
  ctx: CliContext,
  flags: Pick<UpdateFlags, 'config' | 'kubernetesVersion' | 'image'>,
): Promise<{ config?: unknown; set?: Record<string, string> }> {
  const set: Record<string, string> = {};
  if (flags.kubernetesVersion !== undefined) set.kubernetesVersion = flags.kubernetesVersion;
  if (flags.image !== undefined) set.image = flags.image;
  if (flags.config !== undefined && Object.keys(set).length > 0) {
    throw new CliError(
      EXIT.USAGE,
      '--config cannot be combined with --kubernetes-version or --image: put those in the config file',
      { code: 'USAGE' },
    );
  }
  return {
    ...(flags.config !== undefined ? { config: await readConfigFile(flags.config, ctx.cwd) } : {}),
    ...(Object.keys(set).length > 0 ? { set } : {}),
  };
}

async function buildParams(ctx: CliContext, flags: UpdateFlags): Promise<Record<string, unknown>> {
  return {
    ...(await targetParams(ctx, flags)),
    force: Boolean(flags.force),
    drain: Boolean(flags.drain),
    // Sent only when set, so the flag-less call stays what older daemons accept.
    ...(flags.ignoreFleet ? { ignoreFleet: true } : {}),
    dryRun: Boolean(flags.dryRun),
    wait: false,
  };
}

/** An INVALID_PARAMS answer about `set.*` or `config` named by the flag the user typed. */
export function withFlagNames(err: unknown, usedConfigFile: boolean): unknown {
  if (!(err instanceof RpcError) || err.appCode !== 'INVALID_PARAMS') return err;
  const issues = Array.isArray(err.data.issues) ? (err.data.issues as { path?: string }[]) : [];
  const first = issues[0]?.path ?? '';
  const flag = first.startsWith('config') && usedConfigFile ? '--config' : FLAG_OF[first];
  if (!flag) return err;
  return new CliError(EXIT.USAGE, `${flag}: ${err.message}`, { ...err.data, code: err.appCode });
}

export async function runUpdate(ctx: CliContext, flags: UpdateFlags): Promise<void> {
  const params = await buildParams(ctx, flags);
  const interrupt = guardInterrupt(ctx);
  try {
    let op: Operation;
    try {
      op = await startOperation(ctx, { kind: 'update', params, dryRun: flags.dryRun }, interrupt);
    } catch (err) {
      throw withFlagNames(err, flags.config !== undefined);
    }
    await report(ctx, flags, op, interrupt);
  } finally {
    interrupt.dispose();
  }
}

/** The plan of a dry run, the id of a detached update, or the update followed to its end. */
async function report(
  ctx: CliContext,
  flags: UpdateFlags,
  op: Operation,
  interrupt: InterruptGuard,
): Promise<void> {
  const now = (): number => ctx.proc.clock.now();
  if (flags.dryRun) {
    ctx.out.result(op, () => renderPlan(op));
    // The plan includes the preflight checks: a target that cannot be fetched fails the dry run.
    if (op.state === 'failed') throw new CliExit(EXIT.FAILED);
    return;
  }
  if (flags.detach) {
    // stdout is the id alone, so that `id=$(agentctl update --detach)` works; the rest is stderr.
    // Also when the operation has ended already (a no-op: same config), with its exit code.
    ctx.out.result(op, () => op.id);
    if (!ctx.out.json) {
      const text = renderOperation(op, ctx.out.paint, now());
      ctx.out.info(
        isFinal(op) ? text : `${text.split('\n')[0]}; follow it with: ${resumeCommand(ctx, op.id)}`,
      );
    }
    if (isFinal(op) && op.state !== 'succeeded') {
      ctx.out.error(`${op.kind} ${op.id} ${op.state}${op.error ? `: ${firstLine(op.error.message)}` : ''}`);
      throw new CliExit(EXIT.FAILED);
    }
    return;
  }
  // An operation that has ended already (a no-op: same config, or the operation of an
  // idempotency key seen before) is only reported.
  await followAndReport(ctx, op, { interrupt });
}
