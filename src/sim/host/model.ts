/**
 * What each accepted command does to the simulated host, the way systemd and machined would:
 * machines are registered/running/stale, units inside them start only when their rootfs lets
 * them, and output and exit codes follow the real tools closely enough for the engine's checks.
 */
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../../host/fs-atomic.js';
import type { HostPaths } from '../../host/paths.js';
import { MACHINE_NAMES } from '../../host/types.js';
import type { MachineName } from '../../host/types.js';
import { hasSimFault } from '../faults.js';
import type { SimFault } from '../faults.js';
import { simLdconfigCache, simUpstreamDaemon } from './host-commands.js';
import { applySimIp } from './network.js';
import type { InMachineAction, MachinectlVerb, SimCommand } from './command-line.js';
import {
  checkContainerd,
  checkKubelet,
  enableUnit,
  isUnitEnabled,
  kubeletBinaryPresent,
  pathExists,
} from './rootfs.js';
import { bootsIntoStandby } from '../../host/standby-boot.js';
import { SIM_UNITS } from './state.js';
import type { SimPersistedState, SimUnitName, SimUnitRecord } from './state.js';

/** What a simulated command printed and how it exited. */
export interface SimOutcome {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** What the model needs besides the state: where the host files are and which faults apply. */
export interface SimModelContext {
  paths: HostPaths;
  faults: readonly SimFault[];
}

const ok = (stdout = '', stderr = ''): SimOutcome => ({ exitCode: 0, stdout, stderr });
const fail = (stderr: string, exitCode = 1): SimOutcome => ({ exitCode, stdout: '', stderr });

function jobFailed(unit: string, note?: string): string {
  return [
    `Job for ${unit} failed because the control process exited with error code.`,
    `See "systemctl status ${unit}" and "journalctl -xeu ${unit}" for details.`,
    ...(note ? [`(sim: ${note})`] : []),
  ].join('\n');
}

/** Apply one command to `state` (mutated in place) and report its output. */
export async function applySimCommand(
  ctx: SimModelContext,
  state: SimPersistedState,
  cmd: SimCommand,
): Promise<SimOutcome> {
  switch (cmd.kind) {
    case 'daemon-reload':
      state.daemonReloads += 1;
      return ok();
    case 'nspawn-unit':
      return applyNspawnUnit(state, cmd.verb, cmd.machine);
    case 'nspawn-unit-state':
      return ok(nspawnUnitState(state, cmd.machine));
    case 'nspawn-status':
      return nspawnUnitStatus(state, cmd.machine, cmd.lines);
    case 'machinectl':
      return applyMachinectl(ctx, state, cmd.verb, cmd.machine);
    case 'in-machine':
      return applyInMachine(ctx, state, cmd.machine, cmd.action);
    case 'ldconfig-cache':
      return simLdconfigCache(ctx.paths);
    case 'upstream-daemon':
      return simUpstreamDaemon(ctx.paths, cmd.verb);
    case 'ip':
      return applySimIp(ctx.paths, cmd.command);
  }
}

function applyNspawnUnit(
  state: SimPersistedState,
  verb: 'reset-failed' | 'stop',
  m: MachineName,
): SimOutcome {
  const rec = state.machines[m];
  if (verb === 'reset-failed') {
    rec.serviceFailed = false;
    return ok();
  }
  // Stopping the unit ends a running container; a stale registration is machined's, not the unit's.
  if (rec.registration === 'running') shutDown(state, m, 'none');
  rec.serviceFailed = false;
  return ok();
}

/** `systemctl show --property=ActiveState,SubState,Result` of the machine's unit, as systemd prints it. */
function nspawnUnitState(state: SimPersistedState, m: MachineName): string {
  const rec = state.machines[m];
  const [active, sub, result] =
    rec.registration === 'running'
      ? ['active', 'running', 'success']
      : rec.serviceFailed
        ? ['failed', 'failed', 'exit-code']
        : ['inactive', 'dead', 'success'];
  return `ActiveState=${active}\nSubState=${sub}\nResult=${result}`;
}

/**
 * `systemctl status systemd-nspawn@<m>.service`: the unit's state in systemctl's layout, exit
 * code 0 while it runs and 3 otherwise (as systemctl does for an inactive or failed unit).
 */
function nspawnUnitStatus(state: SimPersistedState, m: MachineName, lines: number): SimOutcome {
  const rec = state.machines[m];
  const unit = `systemd-nspawn@${m}.service`;
  const running = rec.registration === 'running';
  const active = running
    ? 'active (running)'
    : rec.serviceFailed
      ? 'failed (Result: exit-code)'
      : 'inactive (dead)';
  const log = [
    `sim systemd[1]: ${running ? `Started ${unit} - Container ${m}.` : rec.serviceFailed ? `${unit}: Failed with result 'exit-code'.` : `${unit}: not running.`}`,
  ].slice(-lines);
  const text = [
    `● ${unit} - Container ${m}`,
    `     Loaded: loaded (/usr/lib/systemd/system/systemd-nspawn@.service; ${rec.enabled ? 'enabled' : 'disabled'}; preset: enabled)`,
    `     Active: ${active}`,
    ...(lines > 0 ? ['', ...log] : []),
  ].join('\n');
  return { exitCode: running ? 0 : 3, stdout: `${text}\n`, stderr: '' };
}

async function applyMachinectl(
  ctx: SimModelContext,
  state: SimPersistedState,
  verb: MachinectlVerb,
  m: MachineName,
): Promise<SimOutcome> {
  const rec = state.machines[m];
  const unit = `systemd-nspawn@${m}.service`;
  switch (verb) {
    case 'enable': {
      if (!(await isDirectory(ctx.paths.machineDir(m)))) return noImage(m);
      const changed = !rec.enabled;
      rec.enabled = true;
      return ok(
        '',
        changed
          ? `Created symlink /etc/systemd/system/machines.target.wants/${unit} → /usr/lib/systemd/system/systemd-nspawn@.service.`
          : '',
      );
    }
    case 'disable': {
      if (!(await isDirectory(ctx.paths.machineDir(m)))) return noImage(m);
      const changed = rec.enabled;
      rec.enabled = false;
      return ok('', changed ? `Removed "/etc/systemd/system/machines.target.wants/${unit}".` : '');
    }
    case 'show':
      if (rec.registration === 'none') return fail(`Could not get path to machine: No machine '${m}' known`);
      return ok(
        [
          `Name=${m}`,
          'Class=container',
          'Service=systemd-nspawn',
          `Unit=${unit}`,
          `RootDirectory=/var/lib/machines/${m}`,
          `State=${rec.registration === 'running' ? 'running' : 'closing'}`,
        ].join('\n'),
      );
    case 'terminate':
      if (rec.registration === 'none') return fail(`Could not terminate machine: No machine '${m}' known`);
      shutDown(state, m, 'none');
      return ok();
    case 'remove':
      return removeImage(ctx, state, m);
    case 'start':
      return startMachine(ctx, state, m);
  }
}

async function startMachine(
  ctx: SimModelContext,
  state: SimPersistedState,
  m: MachineName,
): Promise<SimOutcome> {
  const rec = state.machines[m];
  const unit = `systemd-nspawn@${m}.service`;
  if (rec.registration === 'running') return ok(); // starting an active unit is a no-op
  if (rec.registration === 'stale') {
    rec.serviceFailed = true;
    return fail(`${jobFailed(unit)}\nFailed to register machine: Machine '${m}' already exists`);
  }
  const dir = ctx.paths.machineDir(m);
  if (!(await isDirectory(dir))) return noImage(m);
  const nspawn = ctx.paths.nspawnFile(m);
  if (!(await pathExists(nspawn))) {
    return fail(`Failed to start machine '${m}': settings file ${nspawn} does not exist`);
  }
  if (hasSimFault(ctx.faults, 'start-fails', m)) {
    rec.serviceFailed = true;
    return fail(jobFailed(unit, `fault start-fails:${m}`));
  }
  rec.registration = 'running';
  rec.serviceFailed = false;
  rec.booting = true;
  // `Parameters=systemd.unit=agentd-standby.target`: systemd, journald and D-Bus only.
  rec.standby = bootsIntoStandby(await readFile(nspawn, 'utf8'));
  for (const u of SIM_UNITS) rec.units[u] = { active: 'inactive' };
  if (!rec.standby) await reachDefaultTarget(ctx, state, m);
  return ok();
}

/** The machine's default target: the units enabled in its rootfs start, containerd first (kubelet is ordered after it). */
async function reachDefaultTarget(
  ctx: SimModelContext,
  state: SimPersistedState,
  m: MachineName,
): Promise<void> {
  const rec = state.machines[m];
  rec.standby = false;
  for (const u of SIM_UNITS) {
    if (rec.units[u].active !== 'active' && (await isUnitEnabled(ctx.paths.machineDir(m), u))) {
      rec.units[u] = await evaluateUnit(ctx, state, m, u);
    }
  }
}

async function removeImage(
  ctx: SimModelContext,
  state: SimPersistedState,
  m: MachineName,
): Promise<SimOutcome> {
  const rec = state.machines[m];
  // machined refuses to remove the image of a registered machine (its container holds it).
  if (rec.registration !== 'none') return fail('Could not remove image: Device or resource busy');
  const dir = ctx.paths.machineDir(m);
  if (!(await isDirectory(dir))) return fail(`Could not remove image: No image '${m}' known`);
  // Like machined's image removal: the image and its .nspawn settings file go together.
  await rm(dir, { recursive: true, force: true });
  await rm(ctx.paths.nspawnFile(m), { force: true });
  for (const u of SIM_UNITS) rec.units[u] = { active: 'inactive' };
  return ok();
}

async function applyInMachine(
  ctx: SimModelContext,
  state: SimPersistedState,
  m: MachineName,
  action: InMachineAction,
): Promise<SimOutcome> {
  const rec = state.machines[m];
  // Neither systemd-run nor systemctl --machine reaches the bus of a machine that does not run:
  // "Host is down" either way.
  if (rec.registration !== 'running') return fail('Failed to connect to bus: Host is down');
  if (rec.booting === true) {
    rec.booting = false;
    return fail('Failed to connect to bus: No such file or directory');
  }
  switch (action.type) {
    case 'true':
      return ok();
    case 'is-active': {
      const active = rec.units[action.unit].active;
      return { exitCode: active === 'active' ? 0 : 3, stdout: active, stderr: '' };
    }
    case 'stop':
      for (const u of action.units) rec.units[u] = { active: 'inactive' };
      return ok();
    case 'start-default':
      await reachDefaultTarget(ctx, state, m);
      return ok();
    case 'journal': {
      // The sim keeps no log history: the journal's tail is the unit's state and why.
      const u = rec.units[action.unit];
      const line = `sim ${action.unit.replace(/\.service$/, '')}[1]: ${action.unit} is ${u.active}${u.reason ? `: ${u.reason}` : ''}`;
      return ok(action.lines > 0 ? `${line}\n` : '');
    }
    case 'exec':
      return simExec(ctx.paths.machineDir(m), action.argv);
    case 'enable-now': {
      const rootfs = ctx.paths.machineDir(m);
      for (const u of action.units) await enableUnit(rootfs, u);
      // One transaction, in the units' order (kubelet is ordered after containerd).
      const failed: string[] = [];
      for (const u of SIM_UNITS.filter((x) => action.units.includes(x))) {
        if (rec.units[u].active !== 'active') rec.units[u] = await evaluateUnit(ctx, state, m, u);
        // A crash-looping kubelet (activating) still "starts": systemctl returns once it is forked.
        if (rec.units[u].active === 'failed') failed.push(jobFailed(u, rec.units[u].reason));
      }
      return failed.length > 0 ? fail(failed.join('\n')) : ok();
    }
  }
}

const TEST_FLAGS = new Set(['-e', '-f', '-d', '-x']);

/**
 * The commands a health gate `exec` check may run in a simulated machine: `true`, `false` and
 * `test -e|-f|-d|-x <absolute path>` against the machine's rootfs, so a test makes a check pass
 * or fail through the machine's files. Anything else is not simulated: exit 127, as a shell says
 * for a command it cannot find.
 */
async function simExec(rootfs: string, argv: readonly string[]): Promise<SimOutcome> {
  const [file = '', ...args] = argv;
  const base = file.replace(/^\/(usr\/)?bin\//, '');
  if (base === 'true' && args.length === 0) return ok();
  if (base === 'false' && args.length === 0) return fail('', 1);
  if (
    base === 'test' &&
    args.length === 2 &&
    TEST_FLAGS.has(args[0] ?? '') &&
    path.isAbsolute(args[1] ?? '')
  ) {
    const rel = path.normalize(args[1] ?? '/').replace(/^\/+/, '');
    const p = path.join(rootfs, rel);
    let st: Awaited<ReturnType<typeof stat>> | null = null;
    try {
      st = await stat(p);
    } catch {
      st = null;
    }
    const holds =
      st !== null &&
      (args[0] === '-e' ||
        (args[0] === '-f' && st.isFile()) ||
        (args[0] === '-d' && st.isDirectory()) ||
        (args[0] === '-x' && st.isFile() && (st.mode & 0o111) !== 0));
    return holds ? ok() : fail('', 1);
  }
  return fail(
    `sim: ${argv.join(' ')}: command not simulated in a machine (true, false, test -e|-f|-d|-x PATH)`,
    127,
  );
}

/**
 * Give crash-looping kubelets (Restart=always keeps them `activating`) their next attempt: one
 * becomes active once what held it back is gone (the other machine's kubelet freed the port,
 * the rootfs was fixed).
 */
export async function settleSimState(ctx: SimModelContext, state: SimPersistedState): Promise<void> {
  for (const m of MACHINE_NAMES) {
    const rec = state.machines[m];
    if (rec.registration === 'running' && rec.units['kubelet.service'].active === 'activating') {
      rec.units['kubelet.service'] = await evaluateUnit(ctx, state, m, 'kubelet.service');
    }
  }
}

/**
 * `kubelet-inactive` models a bad new build: it affects a kubelet binary that has never been
 * active. One that has run before — the source machine of an update, brought back by a
 * rollback — still comes up. Binaries are told apart by inode, size and change time, recorded
 * in `var/lib/agentd-sim/known-good-kubelets.json` when they first become active.
 */
function knownGoodFile(ctx: SimModelContext): string {
  return path.join(ctx.paths.resolve('/var/lib/agentd-sim'), 'known-good-kubelets.json');
}

async function kubeletIdentity(rootfs: string): Promise<string | null> {
  try {
    const st = await stat(path.join(rootfs, 'usr/local/bin/kubelet'));
    return `${st.ino}:${st.size}:${Math.round(st.ctimeMs)}`;
  } catch {
    return null;
  }
}

async function readKnownGood(ctx: SimModelContext): Promise<Record<string, string>> {
  try {
    return JSON.parse(await readFile(knownGoodFile(ctx), 'utf8')) as Record<string, string>;
  } catch {
    return {};
  }
}

async function isKnownGoodKubelet(ctx: SimModelContext, m: MachineName, rootfs: string): Promise<boolean> {
  const id = await kubeletIdentity(rootfs);
  return id !== null && (await readKnownGood(ctx))[m] === id;
}

// Called under the state lock (every command runs inside one transaction).
async function rememberGoodKubelet(ctx: SimModelContext, m: MachineName, rootfs: string): Promise<void> {
  const id = await kubeletIdentity(rootfs);
  if (id === null) return;
  const known = await readKnownGood(ctx);
  if (known[m] === id) return;
  known[m] = id;
  await writeFileAtomic(knownGoodFile(ctx), `${JSON.stringify(known)}\n`);
}

// The state a unit reaches when it is started now.
async function evaluateUnit(
  ctx: SimModelContext,
  state: SimPersistedState,
  m: MachineName,
  unit: SimUnitName,
): Promise<SimUnitRecord> {
  const rootfs = ctx.paths.machineDir(m);
  if (unit === 'containerd.service') {
    const check = await checkContainerd(rootfs);
    return check.ok ? { active: 'active' } : { active: 'failed', reason: check.reason };
  }
  if (!(await kubeletBinaryPresent(rootfs))) {
    return { active: 'failed', reason: 'usr/local/bin/kubelet is missing or not executable' };
  }
  if (hasSimFault(ctx.faults, 'kubelet-inactive', m) && !(await isKnownGoodKubelet(ctx, m, rootfs))) {
    return { active: 'activating', reason: `fault kubelet-inactive:${m}` };
  }
  const other = MACHINE_NAMES.find(
    (o) =>
      o !== m &&
      state.machines[o].registration === 'running' &&
      state.machines[o].units[unit].active === 'active',
  );
  if (other) {
    // The machines share the host network namespace: only one kubelet can hold its ports.
    return { active: 'activating', reason: `the kubelet of ${other} holds the host's kubelet ports` };
  }
  const check = await checkKubelet(rootfs);
  if (!check.ok) return { active: 'activating', reason: check.reason };
  await rememberGoodKubelet(ctx, m, rootfs);
  return { active: 'active' };
}

// The container is gone: its units are no longer running (enablement stays in the rootfs).
function shutDown(state: SimPersistedState, m: MachineName, registration: 'none' | 'stale'): void {
  const rec = state.machines[m];
  rec.registration = registration;
  rec.booting = false;
  rec.standby = false;
  for (const u of SIM_UNITS) rec.units[u] = { active: 'inactive' };
}

/**
 * Leave a stale registration, as a crash does: machined still knows the machine, its container
 * is gone and its unit failed (whether or not it was running before).
 */
export function crashSimMachine(state: SimPersistedState, m: MachineName): void {
  shutDown(state, m, 'stale');
  state.machines[m].serviceFailed = true;
}

/** What machinectl says for a verb on an image that is not there (systemd 252). */
function noImage(m: MachineName): SimOutcome {
  return fail(`Machine image '${m}' does not exist.`);
}

async function isDirectory(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isDirectory();
  } catch {
    return false;
  }
}
