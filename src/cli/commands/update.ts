/** `agentctl update`: start an update and follow it to its end (or print the plan, or detach). */
import { formatDuration } from '../../config/duration.js';
import { RpcError } from '../../rpc/client.js';
import { DaemonUnreachableError } from '../../rpc/http-transport.js';
import { readConfigFile } from '../config-file.js';
import type { CliContext } from '../context.js';
import { CliError, CliExit, EXIT } from '../exit-codes.js';
import {
  agentctlCommand,
  followAndReport,
  guardInterrupt,
  resumeCommand,
  type InterruptGuard,
} from '../follow/follow-command.js';
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
  // Ctrl-C before the request went out: nothing was started.
  if (interrupt.signal.aborted) throw interruptedBeforeStart(ctx);
  // Ctrl-C while the request is in flight: say at once what happens, since the answer (with the
  // operation's id) may be slow to come; a second Ctrl-C stops waiting for it. A dry run changes
  // nothing: there the first one does.
  const onInterrupt = (): void =>
    ctx.out.info(
      'interrupted: agentd has not answered the update request yet; waiting for its answer to cancel the update it may have started (Ctrl-C again to stop waiting: the update may then go on)',
    );
  if (!flags.dryRun) interrupt.signal.addEventListener('abort', onInterrupt, { once: true });
  const request = ctx.callUntyped<Operation>('update', params);
  // Its failure matters only while agentctl waits for it (the race below).
  request.catch(() => undefined);
  try {
    const answer = await Promise.race([request, interrupt.pressed(flags.dryRun ? 1 : 2).then(() => null)]);
    if (answer === null) throw flags.dryRun ? interruptedDryRun(ctx) : stoppedWaiting(ctx);
    op = answer;
  } catch (err) {
    if (!flags.dryRun && err instanceof DaemonUnreachableError && err.reason === 'timeout')
      throw unansweredInTime(ctx, err);
    throw withFlagNames(err, flags.config !== undefined);
  } finally {
    interrupt.signal.removeEventListener('abort', onInterrupt);
  }
  // Ctrl-C while the request was in flight: the operator did not want it to start, so the new
  // operation is cancelled (it undoes what little it did); past its point of no return it is
  // followed as a detach instead.
  if (interrupt.signal.aborted && !flags.dryRun && !isFinal(op)) {
    try {
      await ctx.call('operations.cancel', { id: op.id });
      ctx.out.info(`interrupted: cancelled ${op.kind} ${op.id} as it started; nothing was changed`);
      const ended = await ctx.call('operations.wait', { id: op.id });
      ctx.out.result(ended, () => `${op.id} cancelled`);
      throw new CliExit(EXIT.DETACHED);
    } catch (err) {
      if (err instanceof CliExit) throw err;
      // Could not cancel it (past the point of no return): report it as a detach, with its id.
    }
  }
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

/** How to find an update agentctl did not get the id of, and follow or cancel it. */
function howToCheck(ctx: CliContext): string {
  return `see it with: ${agentctlCommand(ctx, 'ops list')}, then follow it with: ${agentctlCommand(ctx, 'ops wait <id>')} (or cancel it: ${agentctlCommand(ctx, 'ops cancel <id>')})`;
}

/** --timeout passed before agentd answered the update request: it may have started all the same. */
function unansweredInTime(ctx: CliContext, err: DaemonUnreachableError): CliError {
  const dialled = err.socketPath || ctx.options.socket;
  const limit = ctx.options.timeoutMs === undefined ? '' : ` (${formatDuration(ctx.options.timeoutMs)})`;
  return new CliError(
    EXIT.TIMEOUT,
    `agentd on ${dialled} did not answer the update request within --timeout${limit}; the update may have started on the daemon all the same: ${howToCheck(ctx)}`,
    { code: 'TIMEOUT', socket: dialled, reason: err.reason, mayHaveStarted: true },
  );
}

/** A second Ctrl-C before agentd answered the update request: stop waiting for its answer. */
function stoppedWaiting(ctx: CliContext): CliError {
  return new CliError(
    EXIT.DETACHED,
    `interrupted before agentd answered the update request; the update may have started on the daemon and go on: ${howToCheck(ctx)}`,
    { code: 'INTERRUPTED', mayHaveStarted: true },
  );
}

/** Ctrl-C before agentd answered a dry run: it changes nothing, so agentctl stops at once. */
function interruptedDryRun(ctx: CliContext): CliExit {
  ctx.out.info('interrupted; a dry run changes nothing');
  return new CliExit(EXIT.DETACHED);
}

/** Ctrl-C before the update request was sent: exit as interrupted, nothing started. */
function interruptedBeforeStart(ctx: CliContext): CliExit {
  ctx.out.info('interrupted before the update was requested; nothing was started');
  return new CliExit(EXIT.DETACHED);
}
