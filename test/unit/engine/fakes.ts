/**
 * Fakes for engine unit tests: a machine manager and a provisioner that record every call in
 * one shared log, fail on demand and can be held at a call (to cancel or race it), plus a
 * temp-dir fixture with the real stores (operation history, journal, applied configs).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { onTestFinished } from 'vitest';
import { agentConfigSchema, type AgentConfig } from '../../../src/config/agent-config.js';
import {
  createAppliedConfigStore,
  type AppliedConfigStore,
} from '../../../src/engine/applied-config-store.js';
import { EventBus, type EngineEvent } from '../../../src/engine/events.js';
import type { Journal } from '../../../src/engine/journal.js';
import type { Operation } from '../../../src/engine/operation.js';
import { OperationRecorder } from '../../../src/engine/operation-recorder.js';
import { OperationStore, newOperationId } from '../../../src/engine/operation-store.js';
import type { PreflightCheck, Provisioner } from '../../../src/provision/provisioner-contract.js';
import type { UpdateDeps } from '../../../src/engine/update.js';
import { CancelledError, CommandFailedError } from '../../../src/errors.js';
import type { MachineInspection, MachineManager } from '../../../src/host/machines.js';
import { createHostPaths, type HostPaths } from '../../../src/host/paths.js';
import type { MachineName } from '../../../src/host/types.js';
import { createMetrics, type Metrics } from '../../../src/metrics/metrics.js';
import { makeAgentConfig } from '../../support/agent-config.js';
import { createFakeClock, type FakeClock } from '../host/fake-clock.js';

export const silentLogger = pino({ level: 'silent' });

/**
 * An open journal of an update kube1 → kube2 interrupted in `stop` (the source already stopped,
 * nothing committed), with `overrides`.
 */
export function makeJournal(overrides: Partial<Journal> = {}): Journal {
  return {
    version: 1,
    operationId: 'op-1',
    kind: 'update',
    source: 'kube1',
    target: 'kube2',
    phase: 'stop',
    phaseState: 'running',
    committed: false,
    sourceStopped: true,
    cordonedByUs: false,
    targetHash: null,
    closed: false,
    outcome: null,
    updatedAt: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

export function config(overrides: Parameters<typeof makeAgentConfig>[0] = {}): AgentConfig {
  return agentConfigSchema.parse(makeAgentConfig(overrides));
}

/** A config at another Kubernetes version. */
export function configAt(version: string): AgentConfig {
  const c = config();
  c.Cluster.Version = version;
  return c;
}

/**
 * Shared by the fakes: every call as `"<verb> <machine>"` in order, failures to inject by the
 * same text (each thrown once unless `sticky`), and holds that pause a call until released.
 */
export class CallLog {
  readonly calls: string[] = [];
  readonly #failures = new Map<string, { error: Error; sticky: boolean }>();
  readonly #holds = new Map<string, { reached: () => void; released: Promise<void> }>();

  /** Make `call` throw `error` (default: a COMMAND_FAILED) the next time, or every time with `sticky`. */
  fail(call: string, error?: Error, sticky = false): void {
    this.#failures.set(call, {
      error: error ?? new CommandFailedError(`sim ${call}`, 1, `${call} failed`),
      sticky,
    });
  }

  /** Pause `call` when it is made: `reached` resolves then, and it goes on once `release()` is called. */
  hold(call: string): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    const released = new Promise<void>((r) => (release = r));
    this.#holds.set(call, { reached, released });
    return { reached: reachedP, release };
  }

  async record(call: string, signal?: AbortSignal): Promise<void> {
    this.calls.push(call);
    const hold = this.#holds.get(call);
    if (hold) {
      this.#holds.delete(call);
      hold.reached();
      await abortable(hold.released, signal, call);
    }
    if (signal?.aborted) throw new CancelledError(call, { cause: signal.reason });
    const failure = this.#failures.get(call);
    if (failure) {
      if (!failure.sticky) this.#failures.delete(call);
      throw failure.error;
    }
  }
}

function abortable(p: Promise<void>, signal: AbortSignal | undefined, what: string): Promise<void> {
  if (!signal) return p;
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(new CancelledError(what, { cause: signal.reason }));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    void p.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}

export interface FakeMachines extends MachineManager {
  /** Machines that run (start adds, stop removes). */
  readonly running: Set<MachineName>;
  /** Machines whose rootfs exists (provision adds, remove deletes). */
  readonly present: Set<MachineName>;
  /** When set, `inspect` waits for it (holds the engine's node refresh, e.g. during admission). */
  inspectGate: Promise<void> | null;
}

export function createFakeMachines(log: CallLog): FakeMachines {
  const running = new Set<MachineName>();
  const present = new Set<MachineName>();
  const kubelet = new Set<MachineName>();
  const fake: FakeMachines = {
    running,
    present,
    inspectGate: null,
    async start(m, signal, o = {}) {
      await log.record(o.enable === false ? `start ${m} (not enabled)` : `start ${m}`, signal);
      running.add(m);
    },
    async setEnabled(m, enabled, signal) {
      await log.record(`${enabled ? 'enable' : 'disable'} ${m}`, signal);
    },
    async startServices(m, signal) {
      await log.record(`startServices ${m}`, signal);
      kubelet.add(m);
    },
    async stopServices(m, signal) {
      await log.record(`stopServices ${m}`, signal);
      kubelet.delete(m);
    },
    async verify(m, options = {}) {
      await log.record(`verify ${m}`, options.signal);
    },
    async stop(m, signal) {
      await log.record(`stop ${m}`, signal);
      running.delete(m);
      kubelet.delete(m);
    },
    async remove(m, signal) {
      await log.record(`remove ${m}`, signal);
      present.delete(m);
    },
    async daemonReload(signal) {
      await log.record('daemonReload', signal);
    },
    async inspect(m): Promise<MachineInspection> {
      // Not recorded: status and preflight probe freely; tests look at what changes the host.
      if (fake.inspectGate) await fake.inspectGate;
      const on = running.has(m);
      const active = on && kubelet.has(m);
      return {
        name: m,
        registered: on,
        running: on,
        kubelet: active ? 'active' : 'inactive',
        healthy: active,
      };
    },
  };
  return fake;
}

export interface FakeProvisioner extends Provisioner {
  /** What preflight answers (default: one passing check). */
  checks: PreflightCheck[];
}

export function createFakeProvisioner(log: CallLog, machines?: FakeMachines): FakeProvisioner {
  const p: FakeProvisioner = {
    checks: [{ name: 'artifacts', ok: true, message: 'reachable' }],
    async preflight(_config, signal) {
      await log.record('preflight', signal);
      return p.checks;
    },
    async provision(m, _config, ctx) {
      await log.record(`provision ${m}`, ctx.signal);
      machines?.present.add(m);
      return { imageDigest: 'sha256:feed', downloadedBytes: 10, cacheHits: 1 };
    },
    async stage(m, _config, ctx) {
      await log.record(`stage ${m}`, ctx.signal);
    },
    async setStandbyBoot(m, on) {
      await log.record(`setStandbyBoot ${m} ${on}`);
    },
    async removeMachineFiles(m) {
      await log.record(`removeMachineFiles ${m}`);
    },
    plannedFiles: (m) => [`/var/lib/machines/${m}/etc/hostname`],
  };
  return p;
}

/** A temp dir with a root and a state dir, the real stores on it, and the fakes. */
export interface EngineFixture {
  dir: string;
  stateDir: string;
  paths: HostPaths;
  clock: FakeClock;
  log: CallLog;
  machines: FakeMachines;
  provisioner: FakeProvisioner;
  applied: AppliedConfigStore;
  store: OperationStore;
  events: EventBus;
  /** Every event published, in order. */
  published: EngineEvent[];
  metrics: Metrics;
  deps: UpdateDeps;
  /** A new operation and its recorder (as the engine makes them). */
  recorder(phases: readonly string[], kind?: Operation['kind']): OperationRecorder;
}

export async function createEngineFixture(): Promise<EngineFixture> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-engine-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true, maxRetries: 5 }));
  const stateDir = path.join(dir, 'state');
  const paths = createHostPaths(path.join(dir, 'root'));
  const clock = createFakeClock();
  const log = new CallLog();
  const machines = createFakeMachines(log);
  const provisioner = createFakeProvisioner(log, machines);
  const applied = createAppliedConfigStore(paths);
  const store = new OperationStore(stateDir);
  const events = new EventBus();
  const published: EngineEvent[] = [];
  events.subscribe((_seq, e) => published.push(e));
  const metrics = createMetrics({ version: 'test', collectDefaults: false });
  const deps: UpdateDeps = {
    stateDir,
    machines,
    provisioner,
    applied,
    clock,
    metrics,
    drainer: null,
    verifyTimeoutMs: 1000,
  };
  return {
    dir,
    stateDir,
    paths,
    clock,
    log,
    machines,
    provisioner,
    applied,
    store,
    events,
    published,
    metrics,
    deps,
    recorder(phases, kind = 'update') {
      const now = clock.now();
      const op: Operation = {
        id: newOperationId(now),
        kind,
        state: 'pending',
        reason: null,
        requestedBy: 'test',
        idempotencyKey: null,
        createdAt: new Date(now).toISOString(),
        startedAt: null,
        finishedAt: null,
        from: null,
        to: null,
        phases: phases.map((name) => ({
          name,
          state: 'pending',
          startedAt: null,
          finishedAt: null,
          error: null,
        })),
        result: null,
        error: null,
      };
      return new OperationRecorder(op, { store, events, metrics, logger: silentLogger, clock });
    },
  };
}
