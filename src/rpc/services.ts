import type { Engine } from '../engine/engine.js';

export type DaemonState = 'starting' | 'recovering' | 'ready' | 'draining';

export interface DaemonInfo {
  version: string;
  pid: number;
  startedAt: string;
  state: DaemonState;
}

/** Status of the Machine CR watcher (`src/watcher`, wired in `src/daemon/kube-wiring.ts`). */
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
}

/** Everything a method handler may reach. */
export interface RpcServices {
  engine: Engine;
  daemonInfo(): DaemonInfo;
  watcherStatus(): WatcherStatus | null;
  /** A cheap key that changes whenever `watcherStatus()` would (for the status cache). */
  watcherStatusKey?(): string;
  openrpc(): Record<string, unknown>;
}
