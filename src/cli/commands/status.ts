import type { MethodTypes } from '../../rpc/methods/index.js';
import type { CliContext } from '../context.js';
import { formatAge, table, toneOf, wrapText } from '../output.js';

type Status = MethodTypes['status']['result'];

/**
 * Node facts older than this are shown with their age: agentd answers facts at most 1 s old unless
 * an operation runs or a read of the node is slow (docs/architecture.md, "The status path").
 */
const OLD_FACTS_MS = 2000;

export async function runStatus(ctx: CliContext): Promise<void> {
  const status = await ctx.client().call('status');
  ctx.out.result(status, () => renderStatus(status, ctx, Date.now()));
}

export function renderStatus(s: Status, ctx: CliContext, now: number): string {
  const p = ctx.out.paint.bind(ctx.out);
  const lines: string[] = [];
  const up = formatAge(now - Date.parse(s.daemon.startedAt));
  lines.push(
    `agentd ${s.daemon.version}  pid ${s.daemon.pid}  up ${up}  ${p(s.daemon.state, toneOf(s.daemon.state))}`,
  );
  const node = s.node;
  // First thing an operator reads: does this node serve workloads right now?
  lines.splice(
    0,
    0,
    node.serving
      ? `serving   ${p('yes', 'good')}`
      : `serving   ${p('NO', 'bad')}  ${node.servingReason ?? ''}`.trimEnd(),
  );
  const starting = s.daemon.state === 'starting' || s.daemon.state === 'recovering';
  const applied = node.applied
    ? `kubernetes ${node.applied.kubernetesVersion}  image ${node.applied.image}  config ${node.applied.hash.slice(0, 12)}`
    : starting
      ? `${s.daemon.state}: the node state is not known yet`
      : 'not joined';
  lines.push(
    `node      active ${node.activeMachine ? p(node.activeMachine, 'bold') : p('none', 'dim')}  ${applied}`,
  );
  if (node.cordoned !== null)
    lines.push(`          ${node.cordoned ? p('cordoned', 'warn') : 'schedulable'}`);
  lines.push('');
  lines.push(
    table([
      ['MACHINE', 'STATE', 'KUBELET', ''],
      ...node.machines.map((m) => [
        m.name,
        p(m.state, toneOf(m.state)),
        p(m.kubelet, toneOf(m.kubelet)),
        m.name === node.activeMachine ? '(active)' : '',
      ]),
    ]),
  );
  const age = node.observedAt === null ? 0 : now - Date.parse(node.observedAt);
  if (age >= OLD_FACTS_MS) lines.push(p(`(machines as read ${formatAge(age)} ago)`, 'dim'));
  lines.push('');
  const op = s.operation;
  lines.push(
    op
      ? `operation ${op.id}  ${op.kind}  ${p(op.state, toneOf(op.state))}  phase ${op.phases.find((ph) => ph.state === 'running')?.name ?? '-'}`
      : 'operation none',
  );
  if (op?.wait)
    lines.push(`  waiting  ${p(op.wait.reason, 'warn')}: ${op.wait.message} (since ${op.wait.since})`);
  const last = s.lastOperation;
  if (last) {
    const when = last.finishedAt ? `${formatAge(now - Date.parse(last.finishedAt))} ago` : '';
    lines.push(
      wrapText(
        `last      ${last.id}  ${last.kind}  ${p(last.state, toneOf(last.state))}  ${when}${last.error ? `  ${last.error.message}` : ''}`,
        100,
        '          ',
      ),
    );
    const recovery = last.result?.recovery as { outcome?: unknown } | undefined;
    if (last.state === 'interrupted' && recovery?.outcome)
      lines.push(`          agentd stopped during it; recovery ${String(recovery.outcome)}`);
  }
  if (s.watcher) {
    const w = s.watcher;
    lines.push(
      w.enabled
        ? `watcher   ${w.machineName ?? '-'}  ${w.connected ? p('connected', 'good') : p('disconnected', 'warn')}${w.lastError ? `  last error: ${w.lastError}` : ''}`
        : `watcher   ${p('off', 'dim')}${w.reason ? `  ${w.reason}` : ''}`,
    );
    if (w.blocked) {
      const t = w.blocked.target;
      const what = [
        typeof t.kubernetesVersion === 'string' ? `kubernetes ${t.kubernetesVersion}` : null,
        typeof t.image === 'string' ? `image ${t.image}` : null,
      ]
        .filter((x) => x !== null)
        .join(', ');
      lines.push(
        wrapText(
          `blocked   ${p(what || 'the requested target', 'warn')} (repaveCounter ${w.blocked.repaveCounter})  ${w.blocked.reason}`,
          100,
          '          ',
        ),
      );
    }
  }
  for (const warning of node.warnings) lines.push(p(`warning: ${warning}`, 'warn'));
  return lines.join('\n');
}
