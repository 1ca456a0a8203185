/**
 * The engine's read side: what the node looks like now — the active machine (from the node
 * state, else from a single applied config), each machine's state and kubelet, the applied
 * config summary and warnings (among them a state file that disagrees with the host). Read at start, before an operation is reported ended, by repair's
 * checks, and by `status` when it is older than the engine lets it get (1 s by default).
 */
import { stat } from 'node:fs/promises';
import { describeError, isAgentError } from '../errors.js';
import type { MachineManager } from '../host/machines.js';
import type { HostPaths } from '../host/paths.js';
import { MACHINE_NAMES, type MachineName } from '../host/types.js';
import { KUBELET_STATES, type Metrics } from '../metrics/metrics.js';
import type { AppliedConfigRecord, AppliedConfigStore } from './applied-config-store.js';
import {
  checkStateFiles,
  inspectedFacts,
  unknownFacts,
  type AppliedState,
  type Disagreement,
  type HostFacts,
  type StateClaims,
} from './host-truth.js';
import { readJournal } from './journal.js';
import { nodeStatePath, readNodeState } from './node-state.js';
import { assessServing, NODE_NOT_READ_YET, type MachineHealth } from './node-health.js';
import type { NodeStatus } from './operation.js';
import { conflictWarning } from './state-check.js';
import type { StatusWarning } from './warnings.js';

export interface NodeSnapshotOptions {
  paths: HostPaths;
  stateDir: string;
  machines: Pick<MachineManager, 'inspect'>;
  applied: AppliedConfigStore;
  metrics: Metrics;
  /** Called after every read of the node (the snapshot is one of the inputs of `status`). */
  onChange?: () => void;
  /** Until agentd has read the node at start, why its state is not known (else null). */
  unknownBecause?: () => string | null;
  /** The time, in ms since the epoch (the engine's injected clock): when a read started is `observedAt`. */
  now: () => number;
}

export class NodeSnapshot {
  readonly #o: NodeSnapshotOptions;
  node: NodeStatus = {
    activeMachine: null,
    ...assessServing(null, [], { unknownBecause: NODE_NOT_READ_YET }),
    applied: null,
    machines: [],
    cordoned: null,
    warnings: [],
    repair: null,
    observedAt: null,
  };
  /** The active machine's applied config as last read (unredacted), or null. */
  activeRecord: AppliedConfigRecord | null = null;
  /** Applied configs that exist but cannot be read (bad sidecar, bad JSON), by machine. */
  unreadable = new Map<MachineName, unknown>();
  /**
   * The last read's claims of the state files, what the host showed of each machine, and where
   * they disagreed (shown as `state-conflict` warnings; an update is refused on them). Null
   * before the first read.
   */
  checked: { claims: StateClaims; facts: HostFacts; disagreements: readonly Disagreement[] } | null = null;
  #refreshing: Promise<void> | null = null;
  /** A read queued behind the one under way (see `refresh`). */
  #queued: Promise<void> | null = null;

  constructor(options: NodeSnapshotOptions) {
    this.#o = options;
  }

  /** Before the first read: say why the node is not known yet (`status` shows it as the reason it does not serve). */
  explainUnknown(reason: string): void {
    if (this.node.observedAt !== null) return;
    this.node = { ...this.node, servingReason: reason };
    this.#o.onChange?.();
  }

  /**
   * Re-read the node; resolves once a read that started after this call has finished, so the
   * caller sees every change it made before calling. A read under way may have started before
   * that change: callers that arrive during it share one more read, queued behind it.
   */
  refresh(): Promise<void> {
    if (this.#refreshing === null) {
      this.#refreshing = this.#read().finally(() => {
        this.#refreshing = null;
      });
      return this.#refreshing;
    }
    this.#queued ??= this.#refreshing
      .catch(() => undefined)
      .then(() => {
        this.#queued = null;
        return this.refresh();
      });
    return this.#queued;
  }

  /** Resolves when no refresh is under way (shutdown). */
  async settled(): Promise<void> {
    await this.#refreshing?.catch(() => undefined);
    await this.#queued?.catch(() => undefined);
  }

  async #read(): Promise<void> {
    // The facts are as of the read's start at the latest: what it reads first may change while
    // it reads the rest.
    const observedAt = new Date(this.#o.now()).toISOString();
    const warnings: StatusWarning[] = [];
    // Every read starts at once (they are reads only); their results are taken in order below.
    const appliedReads = Promise.all(
      MACHINE_NAMES.map((m) =>
        this.#o.applied.read(m).then(
          (rec) => ({ m, ok: true as const, rec }),
          (err: unknown) => ({ m, ok: false as const, err }),
        ),
      ),
    );
    const stateRead = readNodeState(this.#o.stateDir).then(
      (state) => ({ ok: true as const, state }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    const inspections = Promise.all(
      MACHINE_NAMES.map((m) =>
        this.#o.machines.inspect(m).then(
          (info) => ({ m, ok: true as const, info }),
          (err: unknown) => ({ m, ok: false as const, err }),
        ),
      ),
    );
    // A journal that cannot be read claims nothing here (its own error is reported where it is read).
    const journalRead = readJournal(this.#o.stateDir).catch(() => null);
    const records = new Map<MachineName, AppliedConfigRecord>();
    const unreadable = new Map<MachineName, unknown>();
    // What the state files claim, checked against the host below (as an update checks them).
    const applied = {} as Record<MachineName, AppliedState>;
    for (const read of await appliedReads) {
      const m = read.m;
      if (read.ok) {
        const rec = read.rec;
        applied[m] = rec === null ? 'missing' : rec.verified ? 'verified' : 'unverified';
        if (rec) {
          records.set(m, rec);
          if (!rec.verified) {
            warnings.push({
              code: 'applied-config-unverified',
              machine: m,
              message: `${m}: applied config has no .sha256 sidecar`,
            });
          }
        }
      } else {
        const err = read.err;
        unreadable.set(m, err);
        applied[m] = 'unreadable';
        warnings.push({
          code: 'applied-config-unreadable',
          machine: m,
          message: `${m}: ${isAgentError(err) ? `${err.code}: ` : ''}${describeError(err)}`,
        });
      }
    }
    let active: MachineName | null = null;
    let nodeActive: MachineName | null | undefined;
    const stateRes = await stateRead;
    if (stateRes.ok) {
      // The node state (written at commit and by recovery) decides; only a node taken over
      // from the upstream agent, with no state yet, is read from a single applied config.
      const state = stateRes.state;
      nodeActive = state?.activeMachine;
      if (state) active = state.activeMachine;
      else if (records.size === 1 && unreadable.size === 0) active = [...records.keys()][0] ?? null;
      else if (records.size === 0 && unreadable.size === 1) active = [...unreadable.keys()][0] ?? null;
      else if (records.size > 1) {
        warnings.push({
          code: 'active-machine-unknown',
          message: 'both machines have applied configs and no journal says which is active',
        });
      }
    } else {
      warnings.push({
        code: 'node-state-unreadable',
        file: nodeStatePath(this.#o.stateDir),
        message: `node state: ${describeError(stateRes.err)}`,
      });
    }
    const machines: MachineHealth[] = [];
    const facts = {} as HostFacts;
    for (const inspected of await inspections) {
      const m = inspected.m;
      if (inspected.ok) {
        const info = inspected.info;
        const state = info.running ? 'running' : info.registered ? 'stopped' : await this.#presentOnDisk(m);
        machines.push({ name: m, state, kubelet: info.kubelet, healthy: info.healthy });
        facts[m] = inspectedFacts(info, state !== 'absent');
      } else {
        warnings.push({
          code: 'machine-uninspectable',
          machine: m,
          message: `${m}: cannot inspect: ${describeError(inspected.err)}`,
        });
        machines.push({ name: m, state: await this.#presentOnDisk(m), kubelet: 'unknown', healthy: false });
        facts[m] = unknownFacts(m, describeError(inspected.err));
      }
    }
    const health = assessServing(active, machines, { unknownBecause: this.#o.unknownBecause?.() });
    // A joined node that does not serve is something to act on; a node not joined yet is not.
    if (!health.serving && active !== null) {
      warnings.push({
        code: 'not-serving',
        machine: active,
        message: `the node is not serving: ${health.servingReason}`,
      });
    }
    // Trust the host over the files (docs/architecture.md, "Recovery checks"): a file that
    // disagrees is shown with what agentd does about it.
    const journal = await journalRead;
    const claims: StateClaims = { nodeActive, journal, applied };
    const disagreements = checkStateFiles(claims, facts);
    for (const d of disagreements) warnings.push(conflictWarning(d));
    const rec = active ? (records.get(active) ?? null) : null;
    this.checked = { claims, facts, disagreements };
    this.unreadable = unreadable;
    this.activeRecord = rec;
    this.node = {
      activeMachine: active,
      ...health,
      applied: rec
        ? { kubernetesVersion: rec.config.Cluster.Version, image: rec.config.OCIImage, hash: rec.hash }
        : null,
      machines: machines.map(({ name, state, kubelet }) => ({ name, state, kubelet })),
      cordoned: this.node.cordoned,
      warnings,
      // Repair changes between reads: the engine fills it in, live, in `status`.
      repair: null,
      observedAt,
    };
    this.#publishMetrics();
    this.#o.onChange?.();
  }

  async #presentOnDisk(m: MachineName): Promise<'stopped' | 'absent'> {
    try {
      await stat(this.#o.paths.machineDir(m));
      return 'stopped';
    } catch {
      return 'absent';
    }
  }

  #publishMetrics(): void {
    const { metrics } = this.#o;
    for (const m of MACHINE_NAMES)
      metrics.activeMachine.set({ machine: m }, this.node.activeMachine === m ? 1 : 0);
    metrics.nodeServing.set(this.node.serving ? 1 : 0);
    if (this.node.observedAt !== null) metrics.nodeObserved.set(Date.parse(this.node.observedAt) / 1000);
    for (const m of this.node.machines)
      for (const state of KUBELET_STATES)
        metrics.kubeletState.set({ machine: m.name, state }, m.kubelet === state ? 1 : 0);
    metrics.appliedInfo.reset();
    const rec = this.activeRecord;
    if (rec) {
      metrics.appliedInfo.set(
        {
          machine: rec.machine,
          kubernetes_version: rec.config.Cluster.Version,
          image: rec.config.OCIImage,
          hash: rec.hash,
        },
        1,
      );
    }
  }
}
