/**
 * `agentctl uninstall` (docs/operations.md), in this order, each step reported:
 *   1. `systemctl disable --now agentd.service` (when systemd runs), so it cannot restart agentd;
 *   2. stop the daemon through its PID file (SIGTERM, grace, SIGKILL; never a foreign PID), then
 *      take agentd's instance lock and hold it to the end: no agentd runs for this PID file,
 *      socket and state dir, and none starts on them while the node is removed;
 *   3. tear down both machines (stop, remove) — the daemon is gone, so this runs the host
 *      commands itself;
 *   4. remove nspawn files, 5. configs (unless --keep-config), 6. state, 7. runtime files,
 *   8. the unit file, 9. `systemctl daemon-reload` (when systemd runs).
 * When the daemon could not be stopped or a machine could not be removed, the file steps are
 * skipped (and say so): the files are what a rerun needs to finish the job.
 */
import { existsSync, lstatSync } from 'node:fs';
import { lstat, readdir, readFile, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';
import type { MachineManager } from '../../host/machines.js';
import type { HostPaths } from '../../host/paths.js';
import { isPidFileContent } from '../../host/pid-file.js';
import { hasStateDirMarker, STATE_DIR_MARKER } from '../../host/state-dir-marker.js';
import { MACHINE_NAMES, type CommandRunner } from '../../host/types.js';
import { removeUpstreamLeftovers } from '../../host/upstream-cleanup.js';
import type { StopReport } from '../stop-daemon.js';

/** One step of the uninstall as reported (human and JSON). */
export interface UninstallStep {
  step: string;
  ok: boolean;
  /** The step did not run (systemd not running, --keep-config, an earlier failure). */
  skipped: boolean;
  detail: string;
  data?: Record<string, unknown>;
}

export interface UninstallReport {
  /** Every step that ran succeeded. */
  ok: boolean;
  steps: UninstallStep[];
}

export interface UninstallOptions {
  paths: HostPaths;
  /** The daemon's state directory (default `<root>/var/lib/agentd`). */
  stateDir: string;
  pidFile: string;
  socket: string;
  graceMs: number;
  keepConfig: boolean;
  /**
   * Whether the systemctl steps run: systemd runs on this host (`/run/systemd/system` exists)
   * and it is the host agentd managed; when not, why (the detail of the skipped steps).
   */
  systemd: { runs: true } | { runs: false; why: string };
  /** Runs `systemctl`; the machine manager has its own. */
  runner: CommandRunner;
  machines: MachineManager;
  stopDaemon(pidFile: string, graceMs: number): Promise<StopReport>;
  /**
   * Take agentd's instance lock (src/cli/pid-file-check.ts, `claimInstanceLock`) once the daemon
   * is stopped; throws naming the agentd that still holds it. Released when the uninstall ends.
   */
  claimInstance(): Promise<{ release(): Promise<void> }>;
  /** Called as each step ends (live reporting on stderr). */
  onStep?: (step: UninstallStep) => void;
}

const UNIT = 'agentd.service';

/** The unit and what enabling it created, under /etc/systemd/system. */
export function unitPaths(paths: HostPaths): string[] {
  return [
    '/etc/systemd/system/agentd.service',
    '/etc/systemd/system/agentd.service.d',
    '/etc/systemd/system/agentd.socket',
    '/etc/systemd/system/multi-user.target.wants/agentd.service',
    '/etc/systemd/system/sockets.target.wants/agentd.socket',
  ].map((p) => paths.resolve(p));
}

/** nspawn settings, service drop-ins and the machines.target links of both machines. */
export function nspawnPaths(paths: HostPaths): string[] {
  return MACHINE_NAMES.flatMap((m) => [
    paths.nspawnFile(m),
    paths.nspawnDropInDir(m),
    paths.resolve(`/etc/systemd/system/machines.target.wants/systemd-nspawn@${m}.service`),
  ]);
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Remove what exists of `targets`; returns what was there. Never the root itself. */
async function removeAll(targets: readonly string[], root: string): Promise<string[]> {
  const removed: string[] = [];
  for (const target of targets) {
    const resolved = path.resolve(target);
    if (resolved === '/' || resolved === path.resolve(root)) {
      throw new Error(`refusing to remove ${resolved}: it is the root of the host`);
    }
    if (!existsSync(resolved)) continue;
    await rm(resolved, { recursive: true, force: true });
    removed.push(resolved);
  }
  return removed;
}

/** Remove a directory only when it is empty (a shared parent such as /etc/unbounded/agent). */
async function removeIfEmpty(dir: string): Promise<boolean> {
  try {
    if ((await readdir(dir)).length > 0) return false;
    await rmdir(dir);
    return true;
  } catch {
    return false;
  }
}

function isSocket(file: string): boolean {
  try {
    return lstatSync(file).isSocket();
  } catch {
    return false;
  }
}

/** Whether `file` is a regular file holding a PID file's content (a decimal PID and a newline). */
async function holdsPid(file: string): Promise<boolean> {
  try {
    return (await lstat(file)).isFile() && isPidFileContent(await readFile(file, 'utf8'));
  } catch {
    return false;
  }
}

function removedDetail(removed: string[]): string {
  return removed.length === 0 ? 'nothing to remove' : `removed ${removed.join(', ')}`;
}

export async function runUninstallSteps(o: UninstallOptions): Promise<UninstallReport> {
  // The instance lock taken after the stop, held until every step has run.
  const held: { release(): Promise<void> }[] = [];
  try {
    return await runSteps(o, held);
  } finally {
    await Promise.all(held.map((h) => h.release()));
  }
}

async function runSteps(o: UninstallOptions, held: { release(): Promise<void> }[]): Promise<UninstallReport> {
  const steps: UninstallStep[] = [];
  const report = (s: Omit<UninstallStep, 'skipped'> & { skipped?: boolean }): UninstallStep => {
    const step = { skipped: false, ...s };
    steps.push(step);
    o.onStep?.(step);
    return step;
  };
  const skip = (step: string, detail: string): void => void report({ step, ok: true, skipped: true, detail });
  const attempt = async (step: string, fn: () => Promise<Omit<UninstallStep, 'step' | 'ok' | 'skipped'>>) => {
    try {
      return report({ step, ok: true, ...(await fn()) });
    } catch (err) {
      return report({ step, ok: false, detail: message(err) });
    }
  };
  const noSystemd = o.systemd.runs ? '' : o.systemd.why;

  // 1. Before anything is stopped: with Restart=always, systemd would start agentd again.
  if (o.systemd.runs) {
    await attempt('disable-unit', async () => {
      const r = await o.runner.run('systemctl', ['disable', '--now', UNIT], {
        reject: false,
        timeoutMs: 120_000,
      });
      // A unit that is not installed is fine: there is nothing to disable.
      if (r.exitCode !== 0 && !/not (be )?found|does not exist|No such file/i.test(r.stderr)) {
        throw new Error(`systemctl disable --now ${UNIT} exited ${r.exitCode}: ${r.stderr.trim()}`);
      }
      return { detail: r.exitCode === 0 ? `${UNIT} disabled and stopped` : `${UNIT} is not installed` };
    });
  } else skip('disable-unit', noSystemd);

  // 2. The daemon (also when systemd did not manage it: a hand-started agentd).
  const stop = await attempt('stop-daemon', async () => {
    const r = await o.stopDaemon(o.pidFile, o.graceMs);
    const detail = !r.signalled
      ? (r.note ?? 'nothing to stop')
      : r.forceKilled
        ? `agentd (pid ${r.pid}) did not stop within the grace period: force-killed (SIGKILL)`
        : `agentd (pid ${r.pid}) stopped (SIGTERM)`;
    // The PID file is not the last word: no agentd may hold the instance lock either.
    try {
      held.push(await o.claimInstance());
    } catch (err) {
      throw new Error(`${detail}; but ${message(err)}`);
    }
    // Nothing signalled, and the lock free: no agentd runs; a stale PID file goes in step 7.
    return {
      detail: r.signalled ? detail : `${detail}; no agentd runs (its instance lock is free)`,
      data: { ...r },
    };
  });

  // 3. Both machines. Only once the daemon is gone: it could be starting one right now.
  let machinesGone = stop.ok;
  if (stop.ok) {
    for (const m of MACHINE_NAMES) {
      const step = await attempt(`remove-machine-${m}`, async () => {
        const seen = await o.machines.inspect(m);
        const present = seen.registered || existsSync(o.paths.machineDir(m));
        if (!present) return { detail: `${m} is absent`, data: { machine: m, removed: false } };
        await o.machines.stop(m);
        await o.machines.remove(m);
        return { detail: `${m} stopped and removed`, data: { machine: m, removed: true } };
      });
      machinesGone &&= step.ok;
    }
  } else {
    for (const m of MACHINE_NAMES)
      report({
        step: `remove-machine-${m}`,
        ok: false,
        skipped: true,
        detail: 'skipped: the daemon could not be stopped',
      });
  }

  const fileSteps = [
    'remove-nspawn-files',
    'remove-configs',
    'remove-upstream-agent',
    'remove-state',
    'remove-runtime',
    'remove-unit',
  ];
  if (!machinesGone) {
    const why = stop.ok
      ? 'skipped: the machines could not be removed; files are kept so that `agentctl uninstall` can finish the job when run again'
      : 'skipped: the daemon could not be stopped; nothing was removed';
    for (const s of fileSteps) report({ step: s, ok: false, skipped: true, detail: why });
    if (o.systemd.runs) skip('daemon-reload', 'skipped: nothing was removed');
    else skip('daemon-reload', noSystemd);
    return { ok: false, steps };
  }

  const root = o.paths.root;
  await attempt('remove-nspawn-files', async () => {
    const removed = await removeAll(nspawnPaths(o.paths), root);
    return { detail: removedDetail(removed), data: { removed } };
  });
  if (o.keepConfig) skip('remove-configs', 'kept (--keep-config): applied configs and /etc/agentd');
  else {
    await attempt('remove-configs', async () => {
      const removed = await removeAll(
        [
          ...MACHINE_NAMES.flatMap((m) => [o.paths.appliedConfig(m), o.paths.appliedConfigSidecar(m)]),
          o.paths.resolve('/etc/agentd'),
        ],
        root,
      );
      if (await removeIfEmpty(o.paths.agentConfigDir)) removed.push(o.paths.agentConfigDir);
      return { detail: removedDetail(removed), data: { removed } };
    });
  }
  // Upstream's reset removes these too (docs/compatibility.md): its daemon's units, the overlay
  // interfaces, routes and rules of tables 51820-51899, WireGuard keys, its binaries and temp files.
  await attempt('remove-upstream-agent', async () => {
    const failed: string[] = [];
    const r = await removeUpstreamLeftovers({
      runner: o.runner,
      paths: o.paths,
      logger: { warn: (obj, msg) => failed.push(`${msg}: ${obj.err}`), info: () => undefined },
    });
    if (failed.length > 0) throw new Error(failed.join('; '));
    const removed = [
      ...r.units,
      ...r.links.map((l) => `link ${l}`),
      ...r.rules.map((p) => `ip rule ${p}`),
      ...r.tables.map((t) => `route table ${t}`),
      ...r.files,
    ];
    return {
      detail: removed.length ? `removed ${removed.join(', ')}` : 'nothing of the upstream agent',
      data: { ...r },
    };
  });
  await attempt('remove-state', async () => {
    // Only a directory that carries agentd's marker: --state-dir may name any directory.
    if (existsSync(o.stateDir) && !(await hasStateDirMarker(o.stateDir))) {
      throw new Error(
        `refusing to remove ${o.stateDir}: it does not carry agentd's marker ${STATE_DIR_MARKER}, so it is not known to be agentd's state directory; remove it yourself if it is`,
      );
    }
    const removed = await removeAll([o.stateDir], root);
    return { detail: removedDetail(removed), data: { removed } };
  });
  await attempt('remove-runtime', async () => {
    // The socket only if it is one: --socket may name any path, and only a socket is ours to
    // delete. The PID file only if it holds a PID: --pid-file may name any file.
    const socket = isSocket(o.socket) ? [o.socket] : [];
    const ours = await holdsPid(o.pidFile);
    const kept = !ours && existsSync(o.pidFile) ? [o.pidFile] : [];
    const removed = await removeAll(
      [o.paths.resolve('/run/agentd'), ...(ours ? [o.pidFile] : []), ...socket],
      root,
    );
    const note = kept.length ? `; kept ${o.pidFile}: it holds no PID, so it is not agentd's PID file` : '';
    return { detail: `${removedDetail(removed)}${note}`, data: { removed, kept } };
  });
  await attempt('remove-unit', async () => {
    const removed = await removeAll(unitPaths(o.paths), root);
    return { detail: removedDetail(removed), data: { removed } };
  });
  if (o.systemd.runs) {
    await attempt('daemon-reload', async () => {
      await o.runner.run('systemctl', ['daemon-reload'], { timeoutMs: 120_000 });
      return { detail: 'systemd reloaded its units' };
    });
  } else skip('daemon-reload', noSystemd);

  return { ok: steps.every((s) => s.ok), steps };
}
