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
  readonly #changed: () => void;

  /** `onChange` is called after every change (`status` shows this state). */
  constructor(machineName: string, clock: Clock, onChange: () => void = () => undefined) {
    this.#machineName = machineName;
    this.#clock = clock;
    this.#changed = onChange;
  }

  #now(): string {
    return new Date(this.#clock.now()).toISOString();
  }

  setConnected(connected: boolean): void {
    this.#connected = connected;
    if (connected) this.clearError();
    this.#changed();
  }

  event(): void {
    this.#lastEventAt = this.#now();
    this.#changed();
  }

  reconciled(): void {
    this.#lastReconcileAt = this.#now();
    this.clearError();
    this.#changed();
  }

  /** Record an error: an AgentError (watch, registration) or an RpcError (a call the API refused). */
  error(err: unknown): void {
    this.#lastError = describeError(err);
    if (isAgentError(err)) this.#lastErrorCode = err.code;
    else if (err instanceof RpcError) this.#lastErrorCode = err.appCode;
    else this.#lastErrorCode = 'INTERNAL';
    this.#changed();
  }

  clearError(): void {
    this.#lastError = null;
    this.#lastErrorCode = null;
    this.#changed();
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
