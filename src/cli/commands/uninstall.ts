/**
 * `agentctl uninstall`: confirm, then run the uninstall steps with the production host seams
 * (execa for `systemctl` and the machine commands, host paths under --root). Loaded only by
 * this command: nothing else in agentctl pays for execa or the machine manager.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { confirmOrRefuse } from '../confirm.js';
import type { MethodTypes } from '../../rpc/methods/index.js';
import type { CliContext } from '../context.js';
import { CliError, CliExit, EXIT } from '../exit-codes.js';
import type { Output } from '../output.js';
import { checkUninstallPidFile, claimInstanceLock } from '../pid-file-check.js';
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
  /** The host agentd managed; required when no daemon answers to say it. */
  host?: 'systemd' | 'sim';
  stderr: NodeJS.WritableStream;
}

/**
 * Which host to act on: exactly the one the daemon on the socket manages (its --host and --root),
 * refusing a --host or --root that says otherwise; with no daemon answering, the one named by
 * --host. Never guessed: a real host's machines must not be removed for a --sim daemon, and the
 * simulated host is never taken to be at / (where its files would be the real host's).
 */
export async function resolveUninstallHost(
  ctx: CliContext,
  flags: Pick<UninstallFlags, 'host'>,
  root: string,
  /** What the daemon on the socket said (null: none answered); asked when not given. */
  daemon?: DaemonSays | null,
): Promise<'systemd' | 'sim'> {
  const host = answeringHost(ctx, flags, root, daemon === undefined ? await askDaemon(ctx) : daemon);
  if (host === 'sim' && root === '/') {
    throw new CliError(
      EXIT.USAGE,
      `--host sim removes the simulated host under --root, and --root is / (this host's own files): refusing to uninstall; pass the --root of the --sim daemon (./.agentd/root by default)`,
      { code: 'ROOT_REQUIRED', host, root },
    );
  }
  return host;
}

type DaemonSays = MethodTypes['status']['result']['daemon'];

/** What the daemon on the socket says of itself (`status`), or null when none answers. */
async function askDaemon(ctx: CliContext): Promise<DaemonSays | null> {
  try {
    return (await ctx.statusCheck()).daemon;
  } catch {
    return null;
  }
}

/** The host of the daemon on the socket (checked against --host and --root), or --host. */
function answeringHost(
  ctx: CliContext,
  flags: Pick<UninstallFlags, 'host'>,
  root: string,
  daemon: DaemonSays | null,
): 'systemd' | 'sim' {
  const socket = ctx.options.socket;
  if (daemon?.host && daemon.root !== undefined) {
    if (flags.host !== undefined && flags.host !== daemon.host) {
      throw new CliError(
        EXIT.USAGE,
        `--host ${flags.host} does not match the agentd on ${socket}, which runs with --host ${daemon.host}; refusing to uninstall`,
        { code: 'HOST_MISMATCH', daemonHost: daemon.host, host: flags.host },
      );
    }
    if (path.resolve(daemon.root) !== root) {
      throw new CliError(
        EXIT.USAGE,
        `--root ${root} does not match the agentd on ${socket}, which manages --root ${daemon.root}; refusing to uninstall (pass --root ${daemon.root})`,
        { code: 'ROOT_MISMATCH', daemonRoot: daemon.root, root },
      );
    }
    return daemon.host;
  }
  if (flags.host === undefined) {
    throw new CliError(
      EXIT.USAGE,
      `no agentd answers on ${socket} to say which host it manages: name it with --host systemd (the real machinectl and systemctl) or --host sim (the simulated host under --root)`,
      { code: 'HOST_REQUIRED', socket },
    );
  }
  return flags.host;
}

/**
 * The state directory to remove: --state-dir; else the one the daemon on the socket says it
 * uses; else the default of its host: `<root>/var/lib/agentd`, or for `--host sim` the try-out's
 * `./.agentd/state` beside its default root `./.agentd/root`. Any other --sim root names no
 * state dir of its own: refused rather than guessed, so the report never claims a removal it
 * did not make.
 */
export function uninstallStateDir(
  ctx: Pick<CliContext, 'cwd'>,
  flags: Pick<UninstallFlags, 'stateDir'>,
  host: 'systemd' | 'sim',
  root: string,
  daemon: DaemonSays | null,
): string {
  if (flags.stateDir) return path.resolve(ctx.cwd, flags.stateDir);
  if (daemon?.stateDir) return daemon.stateDir;
  if (host === 'systemd') return path.join(root, 'var/lib/agentd');
  const simDir = path.join(ctx.cwd, '.agentd');
  if (root === path.join(simDir, 'root')) return path.join(simDir, 'state');
  throw new CliError(
    EXIT.USAGE,
    `no agentd answers to say where the state of the --host sim node under ${root} is: name it with --state-dir (the --state-dir of the --sim daemon)`,
    { code: 'STATE_DIR_REQUIRED', root },
  );
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
  const daemon = await askDaemon(ctx);
  const host = await resolveUninstallHost(ctx, flags, root, daemon);
  const { createHostPaths } = await import('../../host/paths.js');
  const paths = createHostPaths(root);
  const stateDir = uninstallStateDir(ctx, flags, host, root, daemon);
  const pidFile = path.resolve(ctx.cwd, flags.pidFile);
  const socket = ctx.options.socket;
  // Before anything changes (the question included): the PID file must name the agentd that
  // runs for this node, if one does, or the stop step would leave it running.
  const checked = await checkUninstallPidFile({
    pidFile,
    socket,
    stateDir,
    daemon,
  });
  await confirmOrRefuse(ctx, {
    yes: Boolean(flags.yes),
    command: 'uninstall',
    question: `Uninstall agentd${root === '/' ? '' : ` under ${root}`}: stop it, remove both machines (kube1, kube2), their files${flags.keepConfig ? '' : ', the configs'}, its state and its unit?`,
    stderr: flags.stderr,
  });
  const [{ createExecaRunner }, { createMachineManager }, { runUninstallSteps }] = await Promise.all([
    import('../../host/execa-runner.js'),
    import('../../host/machines.js'),
    import('../uninstall/uninstall.js'),
  ]);
  // The simulated host's commands act on its model under --root, as the --sim daemon's did.
  const runner =
    host === 'sim'
      ? (await import('../../sim/host/index.js')).createSimHost({ root, clock: ctx.proc.clock })
      : createExecaRunner();
  const machines = createMachineManager({ runner, paths, clock: ctx.proc.clock });
  const report = await runUninstallSteps({
    paths,
    stateDir,
    pidFile,
    socket,
    graceMs: flags.grace,
    keepConfig: Boolean(flags.keepConfig),
    // The simulated host has no agentd unit or daemon-reload of the real systemd to touch.
    systemd:
      host === 'sim'
        ? { runs: false, why: 'the simulated host (--host sim) has no systemd unit of agentd: skipped' }
        : systemdRuns(flags.systemd)
          ? { runs: true }
          : {
              runs: false,
              why: 'systemd is not running on this host (/run/systemd/system is absent): skipped',
            },
    runner,
    machines,
    // Only the agentd the check found in the PID file, should the file change meanwhile.
    stopDaemon: (file, graceMs) =>
      stopDaemonByPidFile(file, {
        graceMs,
        staleFileAdvice: false,
        ...(checked.kind === 'agentd' ? { expectPid: checked.pid } : {}),
      }),
    claimInstance: () => claimInstanceLock({ pidFile, socket, stateDir }),
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
      ? p(
          host === 'sim'
            ? `agentd is uninstalled from the simulated host under ${root}`
            : 'agentd is uninstalled',
          'good',
        )
      : p('uninstall is not complete: fix what failed and run agentctl uninstall again', 'bad'),
  );
  if (!report.ok) throw new CliExit(EXIT.FAILED);
}
