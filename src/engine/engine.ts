/**
 * The update engine: the one owner of the node's state. RPC methods call it; it drives the
 * host through the machine manager and records everything in the state dir.
 */
import type { Logger } from 'pino';
import { describeError, isAgentError } from '../errors.js';
import type { HostPaths } from '../host/paths.js';
import { MACHINE_NAMES, type Clock, type MachineName } from '../host/types.js';
import type { Metrics } from '../metrics/metrics.js';
import { redactAgentConfig, type AgentConfig } from './agent-config.js';
import {
  createAppliedConfigStore,
  type AppliedConfigRecord,
  type AppliedConfigStore,
} from './applied-config-store.js';
import type { EventBus } from './events.js';
import { readNodeState } from './node-state.js';
import type { MachineStatus, NodeStatus, Operation } from './operation.js';

/** What the engine needs to know of a machine for `status` (the machine manager provides it). */
export interface MachineInspector {
  inspect(m: MachineName): Promise<{
    registered: boolean;
    running: boolean;
    kubelet: 'active' | 'inactive' | 'failed' | 'unknown';
  }>;
}

export interface EngineOptions {
  paths: HostPaths;
  stateDir: string;
  machines: MachineInspector;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  events: EventBus;
  appliedStore?: AppliedConfigStore;
  /** How old the cached node snapshot may get before `status` refreshes it in the background. */
  statusMaxAgeMs?: number;
}

export interface EngineStatus {
  node: NodeStatus;
  operation: Operation | null;
  lastOperation: Operation | null;
}

export class Engine {
  readonly #o: EngineOptions;
  readonly #applied: AppliedConfigStore;
  #node: NodeStatus = { activeMachine: null, applied: null, machines: [], cordoned: null, warnings: [] };
  #activeRecord: AppliedConfigRecord | null = null;
  #nodeAt = 0;
  #refreshing: Promise<void> | null = null;

  constructor(options: EngineOptions) {
    this.#o = options;
    this.#applied = options.appliedStore ?? createAppliedConfigStore(options.paths, options.logger);
  }

  /** Status as the `status` method reports it; cheap (served from the cached snapshot). */
  status(): EngineStatus {
    const maxAge = this.#o.statusMaxAgeMs ?? 5000;
    if (this.#o.clock.now() - this.#nodeAt > maxAge) void this.refreshNode();
    return { node: this.#node, operation: null, lastOperation: null };
  }

  /** The active machine's applied config with secrets redacted, or null on a node not joined yet. */
  async appliedConfig(): Promise<{
    machine: MachineName;
    config: AgentConfig;
    hash: string;
    verified: boolean;
  } | null> {
    await this.refreshNode();
    const rec = this.#activeRecord;
    if (!rec) return null;
    return {
      machine: rec.machine,
      config: redactAgentConfig(rec.config),
      hash: rec.hash,
      verified: rec.verified,
    };
  }

  /**
   * Let in-flight work reach a safe point within `graceMs` (shutdown). Resolves at once when
   * nothing runs; what does not finish in time is left to the journal and startup recovery.
   */
  async shutdown(graceMs: number): Promise<void> {
    void graceMs;
    await this.#refreshing?.catch(() => undefined);
  }

  /** Re-read the node from disk and the host. Concurrent callers share one refresh. */
  refreshNode(): Promise<void> {
    this.#refreshing ??= this.#readNode().finally(() => {
      this.#refreshing = null;
    });
    return this.#refreshing;
  }

  async #readNode(): Promise<void> {
    const warnings: string[] = [];
    const records = new Map<MachineName, AppliedConfigRecord>();
    for (const m of MACHINE_NAMES) {
      try {
        const rec = await this.#applied.read(m);
        if (rec) {
          records.set(m, rec);
          if (!rec.verified) warnings.push(`${m}: applied config has no .sha256 sidecar`);
        }
      } catch (err) {
        warnings.push(`${m}: ${isAgentError(err) ? `${err.code}: ` : ''}${describeError(err)}`);
      }
    }
    let active: MachineName | null = null;
    try {
      const state = await readNodeState(this.#o.stateDir);
      if (state) active = state.activeMachine;
      else if (records.size === 1) active = [...records.keys()][0] ?? null;
      else if (records.size > 1)
        warnings.push('both machines have applied configs and no journal says which is active');
    } catch (err) {
      warnings.push(`node state: ${describeError(err)}`);
    }
    const machines: MachineStatus[] = [];
    for (const m of MACHINE_NAMES) {
      try {
        const info = await this.#o.machines.inspect(m);
        machines.push({
          name: m,
          state: info.running ? 'running' : info.registered ? 'stopped' : await this.#presentOnDisk(m),
          kubelet: info.kubelet,
        });
      } catch (err) {
        warnings.push(`${m}: cannot inspect: ${describeError(err)}`);
        machines.push({ name: m, state: await this.#presentOnDisk(m), kubelet: 'unknown' });
      }
    }
    const rec = active ? (records.get(active) ?? null) : null;
    this.#activeRecord = rec;
    this.#node = {
      activeMachine: active,
      applied: rec
        ? { kubernetesVersion: rec.config.Cluster.Version, image: rec.config.OCIImage, hash: rec.hash }
        : null,
      machines,
      cordoned: this.#node.cordoned,
      warnings,
    };
    this.#nodeAt = this.#o.clock.now();
    this.#publishNodeMetrics();
  }

  async #presentOnDisk(m: MachineName): Promise<'stopped' | 'absent'> {
    const { stat } = await import('node:fs/promises');
    try {
      await stat(this.#o.paths.machineDir(m));
      return 'stopped';
    } catch {
      return 'absent';
    }
  }

  #publishNodeMetrics(): void {
    const { metrics } = this.#o;
    for (const m of MACHINE_NAMES)
      metrics.activeMachine.set({ machine: m }, this.#node.activeMachine === m ? 1 : 0);
    metrics.appliedInfo.reset();
    const rec = this.#activeRecord;
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
