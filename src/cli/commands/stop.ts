import { inspectPidFile } from '../../host/pid-file.js';
import type { CliContext } from '../context.js';
import { stopDaemonByPidFile } from '../stop-daemon.js';

/** Extra time beyond the daemon's own shutdown grace: its shutdown closes servers and files after it. */
const GRACE_MARGIN_MS = 5_000;

/** What the daemon behind the socket says about itself and its operation, or null when it does not answer. */
async function askDaemon(
  ctx: CliContext,
): Promise<{ pid: number; graceMs: number | null; operation: string | null } | null> {
  try {
    const s = await ctx.statusCheck();
    const op = s.operation;
    const phase = op?.phases.find((p) => p.state === 'running')?.name;
    return {
      pid: s.daemon.pid,
      graceMs: s.daemon.shutdownGraceMs ?? null,
      operation: op ? `${op.kind} ${op.id}${phase ? ` (phase ${phase})` : ''}` : null,
    };
  } catch {
    return null;
  }
}

export async function runStop(
  ctx: CliContext,
  opts: { pidFile: string; graceMs: number; force?: boolean },
): Promise<void> {
  let graceMs = opts.graceMs;
  let operation: string | null = null;
  if (!opts.force) {
    // Never cut a switch-over short: wait at least as long as the daemon's own shutdown does
    // (its --shutdown-grace), when the daemon on the socket is the one in the PID file.
    const daemon = await askDaemon(ctx);
    const pidState = await inspectPidFile(opts.pidFile).catch(() => null);
    const same = daemon !== null && pidState?.kind === 'agentd' && pidState.pid === daemon.pid;
    if (daemon && same && daemon.graceMs !== null)
      graceMs = Math.max(graceMs, daemon.graceMs + GRACE_MARGIN_MS);
    operation = same ? (daemon?.operation ?? null) : null;
    if (operation) {
      ctx.out.info(
        `agentd is running ${operation}: waiting up to ${Math.round(graceMs / 1000)} s for it to reach a safe point (--force to kill it after --grace)`,
      );
    }
  }
  const report = await stopDaemonByPidFile(opts.pidFile, { graceMs });
  const out = { ...report, graceMs, operation };
  ctx.out.result(out, () => {
    if (!report.signalled) return report.note ?? 'nothing to stop';
    return report.forceKilled
      ? `agentd (pid ${report.pid}) did not stop within ${Math.round(graceMs / 1000)} s: killed (SIGKILL)`
      : `agentd (pid ${report.pid}) stopped`;
  });
}
