/** `agentctl fleet status|pause|resume`: the fleet gate as this node sees it, and the operator's switches. */
import type { CliContext } from '../context.js';
import { CliExit, EXIT } from '../exit-codes.js';
import { agentctlCommand } from '../follow/follow-command.js';
import { answerOf, type Change } from '../lost-answer.js';
import { table, type Output } from '../output.js';
import type { MethodTypes } from '../../rpc/methods/index.js';

type FleetStatus = MethodTypes['fleet.status']['result'];

/** The human rendering of `fleet.status` (also printed after pause and resume). */
export function renderFleetStatus(s: FleetStatus, out: Pick<Output, 'paint'>): string {
  const lines: string[] = [];
  // Before the first read of the ConfigMap nothing is known: `present: false` then means "not
  // read yet", not "no policy", and updates wait in the gate until it is read (docs/fleet.md).
  const unread = s.synced === false;
  if (unread) {
    lines.push(
      `fleet      ${out.paint('policy not read yet', 'warn')} (ConfigMap ${s.namespace}/agentd-fleet, this node ${s.node}): updates wait in the gate until agentd has read it`,
    );
    if (s.policyError !== null) lines.push(`policy     ${out.paint('cannot read', 'bad')}: ${s.policyError}`);
  } else if (!s.present) {
    lines.push(`fleet      no policy (ConfigMap ${s.namespace}/agentd-fleet absent): updates are not gated`);
  } else {
    const state = s.halted
      ? out.paint('halted', 'bad')
      : s.paused
        ? out.paint('paused', 'warn')
        : out.paint('rolling', 'good');
    lines.push(`fleet      ${state}  (namespace ${s.namespace}, this node ${s.node})`);
  }
  if (!unread && s.policyError !== null)
    lines.push(`policy     ${out.paint('not applied', 'bad')}: ${s.policyError}`);
  const p = s.policy;
  if (p !== null) {
    lines.push(
      `policy     maxConcurrent ${p.maxConcurrent}, maxFailures ${p.maxFailures}, settleSeconds ${p.settleSeconds}`,
    );
    const windows =
      p.windows.length === 0
        ? 'always open (no windows)'
        : `${s.windowOpen ? out.paint('open', 'good') : out.paint('closed', 'warn')}${s.windowOpen || s.nextWindowOpen === null ? '' : `, next opens ${s.nextWindowOpen}`}; ${p.windows.map((w) => `${w.days.join(',')} ${w.start}-${w.end} ${w.timeZone}`).join('; ')}`;
    lines.push(`windows    ${windows}`);
  }
  if (s.slots.length > 0) {
    lines.push('slots');
    lines.push(
      table([
        ['  NAME', 'HOLDER', 'EXPIRES'],
        ...s.slots.map((l) => [
          `  ${l.name}`,
          l.holder ?? '-',
          l.expiresAt === null ? '-' : `${l.expiresAt}${l.expired ? ' (expired)' : ''}`,
        ]),
      ]),
    );
  }
  lines.push(`failures   ${s.failures.length}${p !== null ? ` of maxFailures ${p.maxFailures}` : ''}`);
  for (const f of s.failures.slice(-10))
    lines.push(`  ${f.at}  ${f.node}  ${f.operation} ${f.state}: ${f.message}`);
  for (const e of s.errors) lines.push(`${out.paint('error', 'bad')}      ${e}`);
  return lines.join('\n');
}

export async function runFleetStatus(ctx: CliContext): Promise<void> {
  const s = await ctx.call('fleet.status');
  const failure = incompleteStatus(s);
  if (failure === null) {
    ctx.out.result(s, () => renderFleetStatus(s, ctx.out));
    return;
  }
  // What could be read is still shown, and `error` (exit 1) says that it is not all of it: a
  // script reading `.slots` gets what there is, one testing `.error` or the exit code learns the rest.
  const error = { code: failure.code, message: failure.message, exitCode: EXIT.FAILED, errors: s.errors };
  ctx.out.result({ ...s, error }, () => renderFleetStatus(s, ctx.out));
  ctx.out.error(failure.message);
  throw new CliExit(EXIT.FAILED);
}

/**
 * Why a `fleet status` is incomplete: agentd could not read part of the fleet from the API server
 * (the slots, the recorded failures). Null when it read everything.
 */
export function incompleteStatus(s: FleetStatus): { code: 'KUBE_UNAVAILABLE'; message: string } | null {
  if (s.errors.length === 0) return null;
  return {
    code: 'KUBE_UNAVAILABLE',
    message: `the fleet status is incomplete: agentd could not read it from the Kubernetes API server (${s.errors.join('; ')}); check the node's API server address and credentials (agentctl status, the watcher line) and the RBAC in deploy/`,
  };
}

/** `fleet pause` or `fleet resume`, for the messages when its answer is lost. */
export function fleetChange(ctx: CliContext, action: 'pause' | 'resume'): Change {
  return {
    request: `the fleet ${action} request`,
    effect: `the ${action} may have taken effect`,
    check: `see whether it did with: ${agentctlCommand(ctx, 'fleet status')}`,
  };
}

export async function runFleetPause(ctx: CliContext): Promise<void> {
  const s = await answerOf(ctx, fleetChange(ctx, 'pause'), ctx.call('fleet.pause'));
  ctx.out.result(
    s,
    () => `paused: running updates finish, no new one takes a slot\n${renderFleetStatus(s, ctx.out)}`,
  );
}

export async function runFleetResume(ctx: CliContext): Promise<void> {
  const r = await answerOf(ctx, fleetChange(ctx, 'resume'), ctx.call('fleet.resume'));
  ctx.out.result(
    r,
    () =>
      `resumed: ${r.clearedFailures} recorded failure(s) cleared, paused: false\n${renderFleetStatus(r.status, ctx.out)}`,
  );
}
