/** Human renderings of operations: one in detail, a list, an update plan, a drain result. */
import { firstLine, formatAge, formatElapsed, table, toneOf, wrapText, type Output } from '../output.js';
import type { Operation } from '../types.js';

type Paint = Output['paint'];

function took(op: Operation, now: number): string {
  if (!op.startedAt) return '-';
  return formatElapsed((op.finishedAt ? Date.parse(op.finishedAt) : now) - Date.parse(op.startedAt));
}

/** `kube1 → kube2` for an operation that moves the node between machines; '' otherwise. */
export function routeOf(op: Pick<Operation, 'kind' | 'from' | 'to'>): string {
  if (op.kind === 'drain' || op.kind === 'uncordon' || (!op.from && !op.to)) return '';
  return `${op.from ?? '(none)'} → ${op.to ?? '(none)'}`;
}

const route = (op: Operation): string => routeOf(op) || '-';

/** An operation in detail: header, phases with state and duration, error and result notes. */
export function renderOperation(op: Operation, paint: Paint, now: number): string {
  const lines = [
    `${op.kind} ${op.id}  ${paint(op.state, toneOf(op.state))}  ${routeOf(op) ? `${routeOf(op)}  ` : ''}took ${took(op, now)}`,
    `requested by ${op.requestedBy} at ${op.createdAt}${op.reason ? `  reason: ${op.reason}` : ''}`,
  ];
  if (op.wait)
    lines.push(`waiting: ${paint(op.wait.reason, 'warn')}: ${op.wait.message} (since ${op.wait.since})`);
  if (op.phases.length > 0) {
    lines.push('');
    lines.push(
      table([
        ['PHASE', 'STATE', 'TOOK', 'ERROR'],
        ...op.phases.map((p) => [
          p.name,
          paint(p.state, toneOf(p.state)),
          p.startedAt
            ? formatElapsed((p.finishedAt ? Date.parse(p.finishedAt) : now) - Date.parse(p.startedAt))
            : '',
          p.error ? `${p.error.code}: ${firstLine(p.error.message, 100)}` : '',
        ]),
      ]),
    );
  }
  if (op.error) lines.push('', paint(wrapText(`error ${op.error.code}: ${op.error.message}`), 'bad'));
  lines.push(...renderDiagnostics(op.error?.data?.diagnostics));
  const result = op.result ?? {};
  lines.push(...renderRecovery(result.recovery));
  if (result.changed === false) lines.push('', 'nothing to change: the node already has this config');
  if (op.kind === 'drain') lines.push(...renderPodResult(result));
  if (op.kind === 'uncordon' && typeof result.outcome === 'string')
    lines.push('', `outcome: ${result.outcome}`);
  return lines.join('\n');
}

/** Newest first, one line each. */
export function renderOperationList(ops: readonly Operation[], paint: Paint, now: number): string {
  if (ops.length === 0) return 'no operations';
  return table([
    ['ID', 'KIND', 'STATE', 'ROUTE', 'CREATED', 'TOOK', 'BY'],
    ...ops.map((op) => [
      op.id,
      op.kind,
      paint(op.state, toneOf(op.state)),
      route(op),
      `${formatAge(now - Date.parse(op.createdAt))} ago`,
      took(op, now),
      op.requestedBy,
    ]),
  ]);
}

/** A dry-run update: what would change and what would be done. */
export function renderPlan(op: Operation): string {
  const result = op.result ?? {};
  const plan = (result.plan ?? {}) as {
    from?: string | null;
    to?: string | null;
    changes?: { path: string; from: unknown; to: unknown }[];
    phases?: string[];
    files?: string[];
    removes?: string[];
    configHash?: string;
  };
  if (result.changed === false) return 'dry run: nothing to change (the node already has this config)';
  const lines = [`dry run: ${plan.from ?? '(none)'} → ${plan.to ?? '(none)'}; nothing was changed`];
  const show = (v: unknown): string => (v === null || v === undefined ? '(none)' : JSON.stringify(v));
  if (plan.changes?.length) {
    lines.push('', 'changes:');
    for (const c of plan.changes) lines.push(`  ${c.path}: ${show(c.from)} → ${show(c.to)}`);
  }
  if (plan.phases?.length) lines.push('', `phases: ${plan.phases.join(', ')}`);
  if (plan.files?.length) {
    lines.push('', 'would write:');
    for (const f of plan.files) lines.push(`  ${f}`);
  }
  if (plan.removes?.length) {
    lines.push('', 'would remove:');
    for (const f of plan.removes) lines.push(`  ${f}`);
  }
  if (plan.configHash) lines.push('', `config hash ${plan.configHash}`);
  const checks = result.preflight as { name: string; ok: boolean; message: string }[] | undefined;
  if (checks?.length) {
    lines.push('', 'preflight:');
    for (const c of checks)
      lines.push(wrapText(`  ${c.ok ? 'ok    ' : 'FAILED'} ${c.name}: ${c.message}`, 100, '         '));
  }
  if (op.error) lines.push('', wrapText(`the update would fail: ${op.error.code}: ${op.error.message}`));
  return lines.join('\n');
}

function podName(p: unknown): string {
  if (typeof p === 'string') return p;
  if (p && typeof p === 'object') {
    const o = p as { namespace?: unknown; name?: unknown; reason?: unknown };
    const name = o.namespace
      ? `${String(o.namespace)}/${String(o.name)}`
      : String(o.name ?? JSON.stringify(p));
    return o.reason ? `${name} (${String(o.reason)})` : name;
  }
  return String(p);
}

/** The pods a drain evicted, skipped and left (its result lists them). */
export function renderPodResult(result: Record<string, unknown>): string[] {
  const lines: string[] = [];
  for (const key of ['evicted', 'skipped', 'remaining', 'warnings'] as const) {
    const pods = result[key];
    if (!Array.isArray(pods)) continue;
    lines.push('', `${key}: ${pods.length}`);
    for (const p of pods.slice(0, 50)) lines.push(`  ${podName(p)}`);
    if (pods.length > 50) lines.push(`  … ${pods.length - 50} more (see --json)`);
  }
  return lines;
}

/** What startup recovery did to an interrupted operation (its `result.recovery`), as lines. */
export function renderRecovery(recovery: unknown): string[] {
  if (!recovery || typeof recovery !== 'object') return [];
  const r = recovery as {
    interruptedIn?: unknown;
    outcome?: unknown;
    actions?: Array<{ step?: unknown; ok?: unknown; error?: unknown; deferred?: unknown }>;
    uncordonPending?: unknown;
  };
  const lines = [
    '',
    wrapText(
      `recovery: agentd stopped during ${String(r.interruptedIn ?? 'an unknown phase')}; at its next start it ${String(r.outcome ?? 'did nothing')}`,
    ),
  ];
  for (const a of Array.isArray(r.actions) ? r.actions : []) {
    const mark = a.ok ? 'ok  ' : a.deferred ? 'later' : 'FAIL';
    lines.push(
      wrapText(`  ${mark} ${String(a.step)}${a.error ? `: ${String(a.error)}` : ''}`, 100, '        '),
    );
  }
  if (r.uncordonPending)
    lines.push('  the node is still cordoned: agentd uncordons it once it can (or run agentctl uncordon)');
  return lines;
}

/** What was captured from a failed machine before it was removed (`error.data.diagnostics`). */
export function renderDiagnostics(diagnostics: unknown): string[] {
  if (!Array.isArray(diagnostics) || diagnostics.length === 0) return [];
  const lines = ['', 'diagnostics captured before the failed machine was removed:'];
  for (const d of diagnostics as Array<{
    what?: unknown;
    command?: unknown;
    output?: unknown;
    error?: unknown;
  }>) {
    lines.push('', `  ${String(d.what ?? 'output')} ($ ${String(d.command ?? '?')})`);
    const text =
      typeof d.output === 'string' && d.output.trim()
        ? d.output.trimEnd()
        : `(${String(d.error ?? 'no output')})`;
    for (const l of text.split('\n')) lines.push(`    ${l}`);
  }
  return lines;
}
