/**
 * What the engine needs from provisioning, as a seam: the production implementation lives in
 * `src/provision/provisioner.ts`; engine tests and benchmarks pass their own.
 */
import type { MachineName } from '../host/types.js';
import type { AgentConfig } from '../config/agent-config.js';
import type { TaskContext } from '../tasks/tasks.js';

export interface PreflightCheck {
  name: string;
  ok: boolean;
  message: string;
}

export interface ProvisionResult {
  imageDigest: string;
  downloadedBytes: number;
  cacheHits: number;
}

export interface Provisioner {
  /** Checks with no side effects: artifacts and image reachable (HEAD / manifest GET), disk space, host paths. */
  preflight(config: AgentConfig, signal: AbortSignal): Promise<PreflightCheck[]>;
  /** Empty the machine directory, unpack the rootfs, install verified artifacts, write OS and nspawn files. */
  provision(m: MachineName, config: AgentConfig, ctx: TaskContext): Promise<ProvisionResult>;
  /** Write everything the machine needs to boot (containerd, kubelet, kubeconfig, CA) into its rootfs. */
  stage(m: MachineName, config: AgentConfig, ctx: TaskContext): Promise<void>;
  /**
   * Make the machine's next boot a standby boot (`on`: agentd's standby target, docs/architecture.md,
   * "Hot standby") or a normal one, in its nspawn settings.
   */
  setStandbyBoot(m: MachineName, on: boolean): Promise<void>;
  /** Remove the machine's nspawn settings and service drop-in (absent files are fine). */
  removeMachineFiles(m: MachineName): Promise<void>;
  /** The files a provision + stage of `m` writes (dry-run plans). */
  plannedFiles(m: MachineName, config: AgentConfig): string[];
  /** Reset: remove what the upstream agent left on the host (src/host/upstream-cleanup.ts). */
  removeUpstreamLeftovers?(signal?: AbortSignal): Promise<unknown>;
  /** What `status` should say about the host (the upstream daemon taken over); none when absent. */
  hostWarnings?(): string[];
}
