import type { CliContext } from '../context.js';
import { stopDaemonByPidFile } from '../stop-daemon.js';

export async function runStop(ctx: CliContext, opts: { pidFile: string; graceMs: number }): Promise<void> {
  const report = await stopDaemonByPidFile(opts.pidFile, { graceMs: opts.graceMs });
  ctx.out.result(report, () => {
    if (!report.signalled) return report.note ?? 'nothing to stop';
    return report.forceKilled
      ? `agentd (pid ${report.pid}) did not stop within the grace period: killed (SIGKILL)`
      : `agentd (pid ${report.pid}) stopped`;
  });
}
