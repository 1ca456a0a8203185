import type * as z from 'zod';
import type { fleetStatusSchema } from './fleet-schemas.js';
import type { StatusVersion } from '../engine/status-version.js';
import type { DrainPort, OperationsPort, StatusReader } from './ports.js';

export type DaemonState = 'starting' | 'recovering' | 'ready' | 'draining';

export interface DaemonInfo {
  version: string;
  pid: number;
  startedAt: string;
  state: DaemonState;
  /** How host commands run: for real (`systemd`) or on the simulated host (`sim`). */
  host?: 'systemd' | 'sim';
  /** The daemon's --root: every host path is under it. */
  root?: string;
  /** The daemon's --shutdown-grace (ms): how long its shutdown waits for in-flight work. */
  shutdownGraceMs?: number;
  /** The daemon's --pid-file: where `agentctl stop` finds its PID. */
  pidFile?: string;
  /** The daemon's --state-dir: what `agentctl uninstall` removes (a --sim daemon's is not the default). */
  stateDir?: string;
}

/** Status of the Machine CR watcher (`src/watcher`, supervised by `src/watcher/supervisor.ts`). */
export interface WatcherStatus {
  /** The watcher runs (it may still be failing: see `connected` and `lastError`). */
  enabled: boolean;
  /** Why it does not run (no credentials, --no-watch, node not joined), else null. */
  reason: string | null;
  /** The watch stream is open. */
  connected: boolean;
  machineName: string | null;
  lastEventAt: string | null;
  lastReconcileAt: string | null;
  /** The most recent error (watch, registration or reconcile); cleared by the next success. */
  lastError: string | null;
  /** Its stable code (e.g. KUBE_UNAVAILABLE), or null. */
  lastErrorCode: string | null;
  /**
   * A target that rolled back or failed on this node and that the watcher does not apply again
   * until the Machine asks anew (docs/watcher.md, "RolledBack"); null when there is none.
   */
  blocked: WatcherBlockedTarget | null;
}

/** What `status.watcher.blocked` shows. */
export interface WatcherBlockedTarget {
  /** The Machine spec's fields that were asked for (Kubernetes version, image, labels, taints). */
  target: Record<string, unknown>;
  repaveCounter: number;
  operationId: string | null;
  outcome: 'rolled_back' | 'failed';
  code: string;
  /** Why the watcher does not apply it, then the update's error message. */
  reason: string;
  since: string;
}

/** The fleet gate's status, pause and resume (src/fleet, wired in src/daemon). */
export interface FleetService {
  status(): Promise<z.input<typeof fleetStatusSchema>>;
  pause(): Promise<z.input<typeof fleetStatusSchema>>;
  resume(): Promise<{ status: z.input<typeof fleetStatusSchema>; clearedFailures: number }>;
}

/** Everything a method handler may reach: the engine through its ports (ports.ts), and the daemon's parts. */
export interface RpcServices {
  /** `status`, `config.get`. */
  status: StatusReader;
  /** `update`, `reset`, `preflight`, `operations.*`. */
  operations: OperationsPort;
  /** `drain`, `uncordon`. */
  drain: DrainPort;
  daemonInfo(): DaemonInfo;
  watcherStatus(): WatcherStatus | null;
  /** The fleet gate, or why it is not available (no credentials); absent without Kubernetes wiring. */
  fleet?: () => FleetService | { unavailable: string };
  /**
   * The version of everything `status` shows (daemon state, engine, Kubernetes, watcher): the
   * `status` answer is serialized once per version.
   */
  statusVersion: StatusVersion;
  openrpc(): Record<string, unknown>;
}
