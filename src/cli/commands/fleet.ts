/**
 * `agentctl fleet status|pause|resume`: the fleet gate as this node sees it (through agentd), and
 * the operator's switches, which act with the operator's own kubeconfig, not through agentd
 * (docs/fleet.md, "Pause, halt and resume").
 */
import os from 'node:os';
import { formatDuration } from '../../config/duration.js';
import type { OperatorAction, OperatorFleetView } from '../../fleet/operator.js';
import type { CliContext } from '../context.js';
import { CliError, CliExit, EXIT } from '../exit-codes.js';
import { agentctlCommand } from '../follow/follow-command.js';
import type { Change } from '../lost-answer.js';
import { table, type Output } from '../output.js';
import type { MethodTypes } from '../../rpc/methods/index.js';

type FleetStatus = MethodTypes['fleet.status']['result'];

/** What `renderFleetStatus` shows: a node's `fleet.status`, or what an operator's pause read. */
export type RenderedFleet = Omit<FleetStatus, 'node'> &
  ({ node: string } | { kubeconfig: Pick<OperatorFleetView['kubeconfig'], 'context'> });

/** The human rendering of `fleet.status` (also printed after pause and resume). */
export function renderFleetStatus(s: RenderedFleet, out: Pick<Output, 'paint'>): string {
  const lines: string[] = [];
  const who = 'node' in s ? `this node ${s.node}` : `read with context ${s.kubeconfig.context}`;
  // Before the first read of the ConfigMap nothing is known: `present: false` then means "not
  // read yet", not "no policy", and updates wait in the gate until it is read (docs/fleet.md).
  const unread = s.synced === false;
  if (unread && 'node' in s) {
    lines.push(
      `fleet      ${out.paint('policy not read yet', 'warn')} (ConfigMap ${s.namespace}/agentd-fleet, ${who}): updates wait in the gate until agentd has read it`,
    );
    if (s.policyError !== null) lines.push(`policy     ${out.paint('cannot read', 'bad')}: ${s.policyError}`);
  } else if (unread) {
    lines.push(
      `fleet      ${out.paint('policy not read', 'warn')} (ConfigMap ${s.namespace}/agentd-fleet, ${who})`,
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
    lines.push(`fleet      ${state}  (namespace ${s.namespace}, ${who})`);
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

/** The options of `fleet pause` and `fleet resume` (src/cli/program-fleet.ts). */
export interface OperatorFlags {
  kubeconfig?: string;
  context?: string;
  fleetNamespace: string;
}

/**
 * `fleet pause` or `fleet resume`: the change made with the operator's kubeconfig, by this
 * process (src/fleet/operator.ts, loaded here only: no other command loads the Kubernetes
 * client), within --timeout (default DEFAULT_CALL_TIMEOUT_MS) for the whole of it.
 */
export async function runFleetOperator(
  ctx: CliContext,
  action: OperatorAction,
  flags: OperatorFlags,
): Promise<void> {
  const operator = await import('../../fleet/operator.js');
  const deadline = new AbortController();
  const done = new AbortController();
  void ctx.proc.clock.sleep(ctx.callTimeoutMs, done.signal).then(
    () => deadline.abort(),
    () => undefined,
  );
  try {
    const kubeconfig = operator.loadOperatorKubeconfig({
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      env: ctx.env,
      homedir: os.homedir(),
      cwd: ctx.cwd,
    });
    const fleet = operator.createOperatorFleet({
      kubeconfig,
      namespace: flags.fleetNamespace,
      clock: ctx.proc.clock,
      signal: deadline.signal,
    });
    const as = `as context ${kubeconfig.context} of ${kubeconfig.files.join(', ')}`;
    if (action === 'pause') {
      const s = await fleet.pause();
      ctx.out.result(
        s,
        () =>
          `paused ${as}: running updates finish, no new one takes a slot\n${renderFleetStatus(s, ctx.out)}`,
      );
    } else {
      const r = await fleet.resume();
      ctx.out.result(
        r,
        () =>
          `resumed ${as}: ${r.clearedFailures} recorded failure(s) cleared, paused: false\n${renderFleetStatus(r.status, ctx.out)}`,
      );
    }
  } catch (err) {
    throw operatorCliError(err, deadline.signal.aborted ? ctx.callTimeoutMs : null);
  } finally {
    done.abort();
  }
}

/**
 * A failure of an operator's pause or resume as agentctl reports it (docs/errors.md, "agentctl
 * errors"); `timedOutAfterMs` is set when the command's deadline aborted it.
 */
export function operatorCliError(err: unknown, timedOutAfterMs: number | null): unknown {
  const e = err as { code?: unknown; message?: unknown; data?: Record<string, unknown> } | null;
  if (typeof e?.code !== 'string' || typeof e.message !== 'string') return err;
  const data = e.data ?? {};
  if (timedOutAfterMs !== null && e.code === 'CANCELLED') {
    return new CliError(
      EXIT.TIMEOUT,
      `the Kubernetes API server did not answer within ${formatDuration(timedOutAfterMs)} (--timeout): ${e.message}`,
      { ...data, code: 'TIMEOUT' },
    );
  }
  switch (e.code) {
    case 'INVALID_CONFIG':
      return new CliError(EXIT.USAGE, e.message, { ...data, code: 'INVALID_CONFIG' });
    case 'KUBE_UNAVAILABLE':
      return data.reason === 'Forbidden'
        ? new CliError(EXIT.FAILED, e.message, { ...data, code: 'PERMISSION_DENIED' })
        : new CliError(EXIT.FAILED, e.message, { ...data, code: 'KUBE_UNAVAILABLE' });
    case 'KUBE_CONFLICT':
      return new CliError(EXIT.FAILED, e.message, { ...data, code: 'KUBE_CONFLICT' });
    default:
      return err;
  }
}
