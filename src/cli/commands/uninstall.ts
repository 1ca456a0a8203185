/**
 * `agentctl uninstall`: confirm, then run the uninstall steps with the production host seams
 * (execa for `systemctl` and the machine commands, host paths under --root). Loaded only by
 * this command: nothing else in agentctl pays for execa or the machine manager.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { confirmOrRefuse } from '../confirm.js';
import type { CliContext } from '../context.js';
import { CliExit, EXIT } from '../exit-codes.js';
import type { Output } from '../output.js';
import { stopDaemonByPidFile } from '../stop-daemon.js';
import type { UninstallStep } from '../uninstall/uninstall.js';

export interface UninstallFlags {
  grace: number;
  yes?: boolean;
  keepConfig?: boolean;
  root: string;
  stateDir?: string;
  pidFile: string;
  /** `auto` looks for /run/systemd/system (on the real host, never under --root). */
  systemd: 'auto' | 'yes' | 'no';
  stderr: NodeJS.WritableStream;
}

/** Whether systemd is the running init: the check systemd's own sd_booted() makes. */
export function systemdRuns(flag: UninstallFlags['systemd'], probe = '/run/systemd/system'): boolean {
  return flag === 'auto' ? existsSync(probe) : flag === 'yes';
}

/** `ok    stop-daemon: agentd (pid 42) stopped (SIGTERM)` */
export function stepLine(s: UninstallStep, paint: Output['paint']): string {
  const word = s.skipped ? 'skip' : s.ok ? 'ok' : 'FAILED';
  const tone = s.skipped ? 'dim' : s.ok ? 'good' : 'bad';
  return `${paint(word, tone)}${' '.repeat(6 - word.length)}  ${s.step}: ${s.detail}`;
}

export async function runUninstall(ctx: CliContext, flags: UninstallFlags): Promise<void> {
  const root = path.resolve(ctx.cwd, flags.root);
  await confirmOrRefuse(ctx, {
    yes: Boolean(flags.yes),
    command: 'uninstall',
    question: `Uninstall agentd${root === '/' ? '' : ` under ${root}`}: stop it, remove both machines (kube1, kube2), their files${flags.keepConfig ? '' : ', the configs'}, its state and its unit?`,
    stderr: flags.stderr,
  });
  const [{ createHostPaths }, { createExecaRunner }, { createMachineManager }, { runUninstallSteps }] =
    await Promise.all([
      import('../../host/paths.js'),
      import('../../host/execa-runner.js'),
      import('../../host/machines.js'),
      import('../uninstall/uninstall.js'),
    ]);
  const paths = createHostPaths(root);
  const runner = createExecaRunner();
  const machines = createMachineManager({ runner, paths, clock: ctx.proc.clock });
  const stateDir = flags.stateDir ? path.resolve(ctx.cwd, flags.stateDir) : paths.resolve('/var/lib/agentd');
  const report = await runUninstallSteps({
    paths,
    stateDir,
    pidFile: path.resolve(ctx.cwd, flags.pidFile),
    socket: ctx.options.socket,
    graceMs: flags.grace,
    keepConfig: Boolean(flags.keepConfig),
    systemd: systemdRuns(flags.systemd),
    runner,
    machines,
    stopDaemon: (pidFile, graceMs) => stopDaemonByPidFile(pidFile, { graceMs }),
    // Each step as it ends, so a slow machine teardown is not silence: the human report itself
    // (stdout), or progress on stderr with --json (whose stdout is the one JSON report).
    onStep: (s) =>
      ctx.out.json
        ? ctx.out.progress.write(`${stepLine(s, ctx.out.progress.paint)}\n`)
        : ctx.out.line(stepLine(s, ctx.out.paint)),
  });
  const p = ctx.out.paint.bind(ctx.out);
  ctx.out.result(report, () =>
    report.ok
      ? p('agentd is uninstalled', 'good')
      : p('uninstall is not complete: fix what failed and run agentctl uninstall again', 'bad'),
  );
  if (!report.ok) throw new CliExit(EXIT.FAILED);
}
