import { inspectPidFile } from '../../host/pid-file.js';
import type { CliContext } from '../context.js';
import { checkStopPidFile } from '../pid-file-check.js';
import { stopDaemonByPidFile } from '../stop-daemon.js';

/** Extra time beyond the daemon's own shutdown grace: its shutdown closes servers and files after it. */
const GRACE_MARGIN_MS = 5_000;

/** What the daemon behind the socket says about itself and its operation, or null when it does not answer. */
async function askDaemon(ctx: CliContext): Promise<{
  pid: number;
  pidFile: string | undefined;
  graceMs: number | null;
  operation: string | null;
} | null> {
  try {
    const s = await ctx.statusCheck();
    const op = s.operation;
    const phase = op?.phases.find((p) => p.state === 'running')?.name;
    return {
      pid: s.daemon.pid,
      pidFile: s.daemon.pidFile,
      graceMs: s.daemon.shutdownGraceMs ?? null,
      operation: op ? `${op.kind} ${op.id}${phase ? ` (phase ${phase})` : ''}` : null,
    };
  } catch {
    return null;
  }
}

export async function runStop(
  ctx: CliContext,
  opts: {
    pidFile: string;
    /** --pid-file (or AGENTD_PID_FILE) was given: `pidFile` is not a default. */
    pidFileNamed: boolean;
    /** --socket (or AGENTD_SOCKET) was given: the daemon to stop is the one on it. */
    socketNamed: boolean;
    graceMs: number;
    force?: boolean;
  },
): Promise<void> {
  let graceMs = opts.graceMs;
  let operation: string | null = null;
  let pidFile = opts.pidFile;
  // The socket names the daemon unless only --pid-file was given: then the PID file's agentd
  // is the one meant, whatever answers on the default socket.
  const bySocket = opts.socketNamed || !opts.pidFileNamed;
  const daemon = opts.force && !bySocket ? null : await askDaemon(ctx);
  let same = false;
  let expectPid: number | undefined;
  if (bySocket) {
    // The daemon says where its PID file is; never signal unless that file names it.
    if (!opts.pidFileNamed && daemon?.pidFile !== undefined) pidFile = daemon.pidFile;
    const state = await checkStopPidFile({
      pidFile,
      socket: ctx.options.socket,
      socketNamed: opts.socketNamed,
      daemon,
    });
    if (state.kind === 'agentd') expectPid = state.pid;
    same = daemon !== null && state.kind === 'agentd' && state.pid === daemon.pid;
  } else if (daemon) {
    const state = await inspectPidFile(pidFile).catch(() => null);
    same = state?.kind === 'agentd' && state.pid === daemon.pid;
  }
  if (!opts.force) {
    // Never cut a switch-over short: wait at least as long as the daemon's own shutdown does
    // (its --shutdown-grace), when the daemon on the socket is the one in the PID file.
    if (daemon && same && daemon.graceMs !== null)
      graceMs = Math.max(graceMs, daemon.graceMs + GRACE_MARGIN_MS);
    operation = same ? (daemon?.operation ?? null) : null;
    if (operation) {
      ctx.out.info(
        `agentd is running ${operation}: waiting up to ${Math.round(graceMs / 1000)} s for it to reach a safe point (--force to kill it after --grace)`,
      );
    }
  }
  const report = await stopDaemonByPidFile(pidFile, {
    graceMs,
    ...(expectPid === undefined ? {} : { expectPid }),
  });
  const out = { ...report, graceMs, operation };
  ctx.out.result(out, () => {
    if (!report.signalled) return report.note ?? 'nothing to stop';
    return report.forceKilled
      ? `agentd (pid ${report.pid}) did not stop within ${Math.round(graceMs / 1000)} s: killed (SIGKILL)`
      : `agentd (pid ${report.pid}) stopped`;
  });
}
