import type { Engine } from '../engine/engine.js';

export type DaemonState = 'starting' | 'recovering' | 'ready' | 'draining';

export interface DaemonInfo {
  version: string;
  pid: number;
  startedAt: string;
  state: DaemonState;
}

/** Status of the Machine CR watcher, when one runs. */
export interface WatcherStatus {
  enabled: boolean;
  connected: boolean;
  machineName: string | null;
  lastEventAt: string | null;
  lastReconcileAt: string | null;
  lastError: string | null;
}

/** Everything a method handler may reach. */
export interface RpcServices {
  engine: Engine;
  daemonInfo(): DaemonInfo;
  watcherStatus(): WatcherStatus | null;
  openrpc(): Record<string, unknown>;
}
