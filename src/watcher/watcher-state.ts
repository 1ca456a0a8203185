/** What `status.watcher` reports: connection, last event, last reconcile, last error. */
import { isAgentError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { RpcError } from '../rpc/client.js';
import type { WatcherStatus } from '../rpc/services.js';

export class WatcherState {
  readonly #clock: Clock;
  readonly #machineName: string;
  #connected = false;
  #lastEventAt: string | null = null;
  #lastReconcileAt: string | null = null;
  #lastError: string | null = null;
  #lastErrorCode: string | null = null;
  #version = 0;

  constructor(machineName: string, clock: Clock) {
    this.#machineName = machineName;
    this.#clock = clock;
  }

  #now(): string {
    return new Date(this.#clock.now()).toISOString();
  }

  setConnected(connected: boolean): void {
    this.#version += 1;
    this.#connected = connected;
    if (connected) this.clearError();
  }

  event(): void {
    this.#version += 1;
    this.#lastEventAt = this.#now();
  }

  reconciled(): void {
    this.#version += 1;
    this.#lastReconcileAt = this.#now();
    this.clearError();
  }

  /** Record an error: an AgentError (watch, registration) or an RpcError (a call the API refused). */
  error(err: unknown): void {
    this.#version += 1;
    this.#lastError = describeError(err);
    if (isAgentError(err)) this.#lastErrorCode = err.code;
    else if (err instanceof RpcError) this.#lastErrorCode = err.appCode;
    else this.#lastErrorCode = 'INTERNAL';
  }

  clearError(): void {
    this.#version += 1;
    this.#lastError = null;
    this.#lastErrorCode = null;
  }

  /** Changes whenever the snapshot would (status caches its answer on it). */
  get version(): number {
    return this.#version;
  }

  get connected(): boolean {
    return this.#connected;
  }

  snapshot(): WatcherStatus {
    return {
      enabled: true,
      reason: null,
      connected: this.#connected,
      machineName: this.#machineName,
      lastEventAt: this.#lastEventAt,
      lastReconcileAt: this.#lastReconcileAt,
      lastError: this.#lastError,
      lastErrorCode: this.#lastErrorCode,
    };
  }
}
