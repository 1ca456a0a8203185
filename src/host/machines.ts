/**
 * The lifecycle of the nspawn machines `kube1`/`kube2`: start, start services, verify, stop,
 * remove, inspect — with exactly the host commands of docs/compatibility.md's host-command table,
 * all through the `CommandRunner`, and every wait on the injected clock. `inspect` asks the same
 * questions over D-Bus first when given a bus (machine-bus.ts).
 */
import { rm } from 'node:fs/promises';
import pino from 'pino';
import type { Logger } from 'pino';
import {
  AgentError,
  CommandFailedError,
  describeError,
  PreconditionFailedError,
  TimeoutError,
  VerifyFailedError,
} from '../errors.js';
import { systemClock } from './clock.js';
import { classifyHostError } from './machine-errors.js';
import { createHttpKubeletHealthCheck } from './machines-health.js';
import type { KubeletHealthCheck } from './machines-health.js';
import type { MachineBus } from './machine-bus.js';
import { backoffDelay, sleepOrCancel } from '../retry/backoff.js';
import { isCancelled, pollUntil } from './machines-poll.js';
import type { HostPaths } from './paths.js';
import type { Clock, CommandResult, CommandRunner, MachineName, RunOptions } from './types.js';
import { pathExists as exists } from './fs-atomic.js';

export type { KubeletHealthCheck } from './machines-health.js';

/** How long the lifecycle steps may take (all in ms, all on the injected clock). */
export interface MachineTimeouts {
  /** `start`: the machine registered and answering `systemd-run` (default 120 s). */
  startMs: number;
  /** `verify`: kubelet active and healthy (default 180 s). */
  verifyMs: number;
  /** `stop`: the machine gone from machined before `machinectl terminate` (default 90 s). */
  stopMs: number;
  /** Between two probes of a poll (default 1 s); also the base of the remove backoff. */
  pollIntervalMs: number;
  /** Each single host command (default 90 s). */
  commandMs: number;
  /** `machinectl remove` attempts before the directory is removed directly (default 3). */
  removeAttempts: number;
}

export const DEFAULT_MACHINE_TIMEOUTS: Readonly<MachineTimeouts> = Object.freeze({
  startMs: 120_000,
  verifyMs: 180_000,
  stopMs: 90_000,
  pollIntervalMs: 1_000,
  commandMs: 90_000,
  removeAttempts: 3,
});

/** kubelet as `status` shows it. */
export type KubeletState = 'active' | 'inactive' | 'failed' | 'unknown';

/** What `inspect` found out about one machine. */
export interface MachineInspection {
  name: MachineName;
  /** machined knows the machine (`machinectl show` succeeds). */
  registered: boolean;
  /** Its systemd answers `systemctl --machine=<m> is-active kubelet.service`. */
  running: boolean;
  kubelet: KubeletState;
  /** kubelet's health endpoint answered ok; only probed when kubelet is active, else false. */
  healthy: boolean;
}

export interface VerifyOptions {
  /** Default: `timeouts.verifyMs`. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Drives one machine slot through its lifecycle. */
export interface MachineManager {
  /**
   * Enable and start the machine (clearing a stale registration), then wait until it answers.
   * `enable: false` (a standby boot) leaves it out of machines.target: a host reboot does not boot it.
   * Starting a machine that runs only waits for its answer.
   */
  start(m: MachineName, signal?: AbortSignal, o?: { enable?: boolean }): Promise<void>;
  /** `machinectl enable` (boot at host start) or `disable`. */
  setEnabled(m: MachineName, enabled: boolean, signal?: AbortSignal): Promise<void>;
  /**
   * `enable --now` containerd and kubelet inside the machine (one transaction: kubelet is ordered
   * after containerd), then queue its default target, which brings up the rest of a machine booted
   * into standby (a no-op in one that booted normally).
   */
  startServices(m: MachineName, signal?: AbortSignal): Promise<void>;
  /**
   * Stop kubelet and containerd inside a running machine, which stays booted (the standby switch);
   * fails when the command cannot run or kubelet is still active after it.
   */
  stopServices(m: MachineName, signal?: AbortSignal): Promise<void>;
  /** Wait until kubelet is active and healthy; `VerifyFailedError` with the last state seen otherwise. */
  verify(m: MachineName, options?: VerifyOptions): Promise<void>;
  /** Stop kubelet, containerd, then the machine. Stopping a machine that is not running succeeds. */
  stop(m: MachineName, signal?: AbortSignal): Promise<void>;
  /** Remove the machine's rootfs (`machinectl remove`, else the directory). An absent machine succeeds. */
  remove(m: MachineName, signal?: AbortSignal): Promise<void>;
  /** `systemctl daemon-reload` (after nspawn files or unit drop-ins changed). */
  daemonReload(signal?: AbortSignal): Promise<void>;
  /** What the host says about the machine; never throws for a missing machine. */
  inspect(m: MachineName, signal?: AbortSignal): Promise<MachineInspection>;
}

export interface MachineManagerOptions {
  runner: CommandRunner;
  paths: HostPaths;
  clock?: Clock;
  logger?: Logger;
  /** Default: GET http://127.0.0.1:10248/healthz (2 s timeout). The sim passes `SimHost.kubeletHealthy`. */
  kubeletHealth?: KubeletHealthCheck;
  /**
   * `inspect` asks this first (machine-bus.ts: machined and the machine's systemd over D-Bus, no
   * process started) and runs the commands only when it cannot say. Absent: commands only.
   */
  bus?: MachineBus;
  timeouts?: Partial<MachineTimeouts>;
}

/** What `containerExited` reads of a machine's unit. */
const UNIT_STATE_PROPERTIES = ['--property=ActiveState', '--property=SubState', '--property=Result'] as const;
/** The first wait for a started machine's bus (then doubling up to the poll interval). */
const BUS_FIRST_POLL_MS = 100;
/** Probes made by `inspect` should answer fast: it serves `status`. */
const INSPECT_COMMAND_MS = 10_000;
/** After `machinectl terminate`, how many poll intervals to wait for the registration to go. */
const TERMINATE_GRACE_POLLS = 10;
const SERVICES = ['containerd.service', 'kubelet.service'] as const;

const nspawnUnit = (m: MachineName): string => `systemd-nspawn@${m}.service`;
const inMachine = (m: MachineName, ...command: string[]): string[] => [
  `--machine=${m}`,
  '--pipe',
  '--wait',
  ...command,
];

/**
 * Run `argv` inside machine `m` the way every in-machine command runs
 * (`systemd-run --machine=<m> --pipe --wait …`): the health gate's exec checks. A non-zero exit
 * resolves with its exit code; a command that cannot run at all rejects (COMMAND_FAILED, TIMEOUT).
 */
export function runInMachine(
  runner: CommandRunner,
  m: MachineName,
  argv: readonly string[],
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<CommandResult> {
  return runner.run('systemd-run', inMachine(m, ...argv), { ...options, reject: false });
}

/** Create the machine manager. */
export function createMachineManager(options: MachineManagerOptions): MachineManager {
  const { runner, paths } = options;
  const clock = options.clock ?? systemClock;
  const log = (options.logger ?? pino({ enabled: false })).child({ subsystem: 'machines' });
  const kubeletHealth = options.kubeletHealth ?? createHttpKubeletHealthCheck();
  const t: MachineTimeouts = { ...DEFAULT_MACHINE_TIMEOUTS, ...options.timeouts };

  const run = (file: string, args: string[], runOptions: RunOptions = {}): Promise<CommandResult> =>
    runner.run(file, args, { timeoutMs: t.commandMs, ...runOptions });

  // A probe that answers only yes or no: failures to run it count as "no", except cancellation.
  async function succeeds(file: string, args: string[], runOptions: RunOptions = {}): Promise<boolean> {
    try {
      return (await run(file, args, { ...runOptions, reject: false })).exitCode === 0;
    } catch (err) {
      if (isCancelled(err)) throw err;
      log.debug({ err: describeError(err) }, 'probe failed');
      return false;
    }
  }

  const isRegistered = (m: MachineName, signal?: AbortSignal, timeoutMs?: number): Promise<boolean> =>
    succeeds('machinectl', ['show', m], { signal, timeoutMs });

  async function waitUntilUnregistered(
    m: MachineName,
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    const what = `wait for machine ${m} to leave machined`;
    return pollUntil(
      { clock, deadline, intervalMs: t.pollIntervalMs, signal, what },
      async () => !(await isRegistered(m, signal)),
    );
  }

  async function start(m: MachineName, signal?: AbortSignal, o: { enable?: boolean } = {}): Promise<void> {
    const what = `start machine ${m}`;
    const deadline = clock.now() + t.startMs;
    log.info({ machine: m, enable: o.enable !== false }, `starting machine ${m}`);
    if (o.enable !== false) await run('machinectl', ['enable', m], { signal });
    try {
      await run('machinectl', ['start', m], { signal });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      // A registration outlived its container (crash, failed unit): clear it and start afresh.
      log.warn({ machine: m }, 'machine is already registered; clearing the stale registration');
      await run('systemctl', ['reset-failed', nspawnUnit(m)], { signal, reject: false });
      await run('machinectl', ['terminate', m], { signal, reject: false });
      if (!(await waitUntilUnregistered(m, deadline, signal))) {
        throw new TimeoutError(`${what}: wait for the stale registration to go away`, t.startMs, {
          data: { machine: m },
        });
      }
      await run('machinectl', ['start', m], { signal });
    }
    // The machine's bus answers a few hundred ms after `machinectl start` on real systemd, and
    // this wait is inside the down window of a switch-over: poll fast first, then back off.
    const answered = await pollUntil(
      { clock, deadline, intervalMs: t.pollIntervalMs, firstIntervalMs: BUS_FIRST_POLL_MS, signal, what },
      async () => {
        if (await succeeds('systemd-run', inMachine(m, '/bin/true'), { signal })) return true;
        // `machinectl start` returns as soon as nspawn runs the container; a machine that
        // cannot boot (no init, a broken rootfs) exits right after, and its unit waits to be
        // restarted. Fail now rather than at the start timeout.
        const exited = await containerExited(m, signal);
        if (exited) {
          throw new CommandFailedError(`machinectl start ${m}`, null, exited, {
            reason: `the machine's container exited while it booted (journalctl -u ${nspawnUnit(m)} says why)`,
            data: { machine: m },
          });
        }
        return false;
      },
    );
    if (!answered) {
      throw new TimeoutError(`${what}: the machine did not answer systemd-run`, t.startMs, {
        data: { machine: m },
      });
    }
    log.info({ machine: m }, `machine ${m} is running`);
  }

  /**
   * How the machine's unit ended when its container is gone during a start (failed, or waiting
   * for `Restart=on-failure` to start it again), as `systemctl show` says it; null while it runs.
   */
  async function containerExited(m: MachineName, signal?: AbortSignal): Promise<string | null> {
    const res = await run('systemctl', ['show', ...UNIT_STATE_PROPERTIES, nspawnUnit(m)], {
      signal,
      reject: false,
      timeoutMs: INSPECT_COMMAND_MS,
    });
    if (res.exitCode !== 0) return null;
    const props = Object.fromEntries(
      res.stdout
        .split('\n')
        .filter((l) => l.includes('='))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    const gone = props.ActiveState === 'failed' || props.SubState === 'auto-restart';
    return gone
      ? `${nspawnUnit(m)}: ${UNIT_STATE_PROPERTIES.map((p) => p.slice('--property='.length))
          .map((k) => `${k}=${props[k] ?? ''}`)
          .join(' ')}`
      : null;
  }

  async function setEnabled(m: MachineName, enabled: boolean, signal?: AbortSignal): Promise<void> {
    await run('machinectl', [enabled ? 'enable' : 'disable', m], { signal });
  }

  async function startServices(m: MachineName, signal?: AbortSignal): Promise<void> {
    log.info({ machine: m, units: SERVICES }, `starting ${SERVICES.join(' and ')} in ${m}`);
    await run('systemd-run', inMachine(m, 'systemctl', 'enable', '--now', ...SERVICES), { signal });
    await run('systemctl', [`--machine=${m}`, 'start', '--no-block', 'default.target'], { signal });
  }

  async function stopServices(m: MachineName, signal?: AbortSignal): Promise<void> {
    log.info({ machine: m }, `stopping kubelet and containerd in ${m}`);
    // One transaction: systemd stops kubelet before containerd (the reverse of its After=).
    await run('systemd-run', inMachine(m, 'systemctl', 'stop', 'kubelet.service', 'containerd.service'), {
      signal,
    });
    const res = await run('systemctl', [`--machine=${m}`, 'is-active', 'kubelet.service'], {
      signal,
      reject: false,
    });
    const state = kubeletStateOf(res.stdout.trim());
    if (state === 'active' || state === 'unknown') {
      throw new CommandFailedError(
        `systemctl --machine=${m} is-active kubelet.service`,
        res.exitCode,
        res.stderr,
        {
          reason: `kubelet in ${m} is ${res.stdout.trim() || 'unknown'} after it was stopped`,
          data: { machine: m },
        },
      );
    }
  }

  async function verify(m: MachineName, verifyOptions: VerifyOptions = {}): Promise<void> {
    const { signal } = verifyOptions;
    const timeoutMs = verifyOptions.timeoutMs ?? t.verifyMs;
    const what = `verify machine ${m}`;
    let lastState = 'not checked yet';
    const healthy = await pollUntil(
      { clock, deadline: clock.now() + timeoutMs, intervalMs: t.pollIntervalMs, signal, what },
      async () => {
        try {
          const res = await run('systemd-run', inMachine(m, 'systemctl', 'is-active', 'kubelet.service'), {
            signal,
            reject: false,
          });
          const word = res.stdout.trim();
          if (word !== 'active') {
            lastState = `kubelet.service is ${word || `unknown (exit code ${res.exitCode}: ${res.stderr.trim()})`}`;
            return false;
          }
        } catch (err) {
          if (isCancelled(err)) throw err;
          lastState = `is-active failed: ${describeError(err)}`;
          return false;
        }
        try {
          if (await kubeletHealth(m, signal)) return true;
        } catch (err) {
          // agentd had no descriptor for the request: not kubelet's fault; the poll goes on.
          lastState = `kubelet.service is active; its health endpoint could not be asked: ${describeError(err)}`;
          return false;
        }
        lastState = 'kubelet.service is active but its health endpoint does not answer ok';
        return false;
      },
    );
    if (!healthy) {
      throw new VerifyFailedError(
        `${what}: kubelet not healthy after ${timeoutMs} ms (last state: ${lastState})`,
        {
          data: { machine: m, timeoutMs, lastState },
        },
      );
    }
    log.info({ machine: m }, `kubelet in ${m} is active and healthy`);
  }

  async function stop(m: MachineName, signal?: AbortSignal): Promise<void> {
    const deadline = clock.now() + t.stopMs;
    log.info({ machine: m }, `stopping machine ${m}`);
    // kubelet before containerd, so kubelet does not see its runtime vanish under it.
    for (const unit of ['kubelet.service', 'containerd.service']) {
      // Fails when the machine is not running, which is fine: then nothing runs in it.
      await succeeds('systemd-run', inMachine(m, 'systemctl', 'stop', unit), { signal });
    }
    await tolerate(m, 'machinectl disable', () => run('machinectl', ['disable', m], { signal }));
    await tolerate(m, 'systemctl stop', () => run('systemctl', ['stop', nspawnUnit(m)], { signal }));
    if (await waitUntilUnregistered(m, deadline, signal)) {
      log.info({ machine: m }, `machine ${m} stopped`);
      return;
    }
    log.warn({ machine: m }, 'machine is still registered after stopping its unit; terminating it');
    await run('machinectl', ['terminate', m], { signal, reject: false });
    const graceDeadline = clock.now() + t.pollIntervalMs * TERMINATE_GRACE_POLLS;
    if (!(await waitUntilUnregistered(m, graceDeadline, signal))) {
      throw new TimeoutError(`stop machine ${m}: still registered after machinectl terminate`, t.stopMs, {
        data: { machine: m },
      });
    }
  }

  // Best-effort steps of stop: a failure is logged, the next step still runs.
  async function tolerate(m: MachineName, step: string, fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      if (isCancelled(err)) throw err;
      log.warn({ machine: m, step, err: describeError(err) }, 'stop step failed; continuing');
    }
  }

  async function remove(m: MachineName, signal?: AbortSignal): Promise<void> {
    const dir = paths.machineDir(m);
    if (!(await exists(dir))) {
      log.info({ machine: m }, 'machine directory is absent; nothing to remove');
      return;
    }
    for (let attempt = 0; attempt < t.removeAttempts; attempt++) {
      let res: CommandResult | undefined;
      try {
        res = await run('machinectl', ['remove', m], { signal, reject: false });
      } catch (err) {
        if (isCancelled(err)) throw err;
        log.warn({ machine: m, err: describeError(err) }, 'machinectl remove failed');
      }
      if (res?.exitCode === 0 && !(await exists(dir))) {
        log.info({ machine: m }, `machine ${m} removed`);
        return;
      }
      // machined does not see it as an image: retrying will not help.
      if (res && classifyHostError(res.stderr) === 'no-image') break;
      if (attempt + 1 < t.removeAttempts) {
        const wait = backoffDelay(attempt + 1, { baseMs: t.pollIntervalMs, maxMs: 8 * t.pollIntervalMs });
        await sleepOrCancel(clock, wait, signal, `remove machine ${m}`);
      }
    }
    // Never pull the rootfs out from under a container that still runs.
    if (await isRegistered(m, signal)) {
      throw new PreconditionFailedError(
        `remove machine ${m}: it is still registered with machined; stop it first`,
        {
          data: { machine: m },
        },
      );
    }
    log.warn({ machine: m, dir }, 'machinectl remove did not remove the machine; removing its directory');
    try {
      await rm(dir, { recursive: true, force: true });
    } catch (err) {
      throw new AgentError('INTERNAL', `remove machine ${m}: remove ${dir}: ${describeError(err)}`, {
        cause: err,
        data: { machine: m, dir },
      });
    }
  }

  async function daemonReload(signal?: AbortSignal): Promise<void> {
    await run('systemctl', ['daemon-reload'], { signal });
  }

  // The machines that ran at their last inspection. For those, inspect asks the machine's systemd
  // first: an answer means it is registered (its bus is reached through machined), so a check of
  // a running node costs one command per machine, not two. Only the order of the questions
  // depends on it, never the result: a machine that stopped since falls through to machinectl.
  const ranLastTime = new Set<MachineName>();

  async function inspect(m: MachineName, signal?: AbortSignal): Promise<MachineInspection> {
    const quick: RunOptions = { signal, timeoutMs: Math.min(t.commandMs, INSPECT_COMMAND_MS), reject: false };
    const seen: MachineInspection = {
      name: m,
      registered: false,
      running: false,
      kubelet: 'inactive',
      healthy: false,
    };
    // One question to the machine's own systemd over its bus. Not `systemd-run`, which makes a
    // transient unit in the machine: this check runs every 30 s (repair), and each unit left two
    // lines in the machine's journal. A machine whose systemd answers runs; the answer is
    // kubelet's state. One that does not run answers nothing ("Failed to connect to bus").
    const askKubelet = async (): Promise<string> =>
      (await run('systemctl', [`--machine=${m}`, 'is-active', 'kubelet.service'], quick)).stdout.trim();
    // With a bus (a real host), machined and the machine's systemd are asked directly and the
    // commands run only when it cannot say (machine-bus.ts): the same answers, no process started.
    try {
      const viaBus = await options.bus?.inspect(m, {
        timeoutMs: quick.timeoutMs ?? INSPECT_COMMAND_MS,
        signal,
      });
      if (viaBus && !viaBus.registered) {
        ranLastTime.delete(m);
        return seen;
      }
      let answer = viaBus?.activeState ?? (ranLastTime.has(m) ? await askKubelet() : undefined);
      ranLastTime.delete(m);
      if (!answer) {
        seen.registered = (await run('machinectl', ['show', m], quick)).exitCode === 0;
        if (!seen.registered) return seen;
        answer ??= await askKubelet();
        if (!answer) return seen;
      }
      seen.registered = true;
      seen.running = true;
      ranLastTime.add(m);
      seen.kubelet = kubeletStateOf(answer);
      if (seen.kubelet === 'active') seen.healthy = await kubeletHealth(m, signal);
      return seen;
    } catch (err) {
      if (isCancelled(err)) throw err;
      log.warn({ machine: m, err: describeError(err) }, 'inspect failed');
      return { ...seen, kubelet: 'unknown' };
    }
  }

  return { start, setEnabled, startServices, stopServices, verify, stop, remove, daemonReload, inspect };
}

/** `machinectl start` refused because machined still holds a registration of that name. */
function isAlreadyExists(err: unknown): boolean {
  return (
    err instanceof CommandFailedError &&
    classifyHostError(`${err.stderrTail}\n${err.message}`) === 'already-exists'
  );
}

/** Map `systemctl is-active` output onto the states `status` reports. */
export function kubeletStateOf(isActiveWord: string): KubeletState {
  switch (isActiveWord) {
    case 'active':
    case 'reloading':
      return 'active';
    case 'inactive':
    case 'deactivating':
      return 'inactive';
    // kubelet.service is Type=simple with Restart=always: `activating` means it crashed and waits to restart.
    case 'activating':
    case 'failed':
      return 'failed';
    default:
      return 'unknown';
  }
}
