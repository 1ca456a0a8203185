/** What `status.watcher` reports: connection, last event, last reconcile, last error. */
import { isAgentError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { RpcError } from '../rpc/client.js';
import type { WatcherBlockedTarget, WatcherStatus } from '../rpc/services.js';
import { describeBlock } from './blocked-target.js';
import type { BlockedTarget } from './blocked-target.js';

export class WatcherState {
  readonly #clock: Clock;
  readonly #machineName: string;
  #connected = false;
  #lastEventAt: string | null = null;
  #lastReconcileAt: string | null = null;
  #lastError: string | null = null;
  #lastErrorCode: string | null = null;
  #blocked: WatcherBlockedTarget | null = null;
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

  /** The target the watcher does not apply again (or null), as the last reconcile found it. */
  setBlocked(block: BlockedTarget | null): void {
    const next: WatcherBlockedTarget | null =
      block === null
        ? null
        : {
            target: { ...block.target },
            repaveCounter: block.repaveCounter,
            operationId: block.operationId,
            outcome: block.outcome,
            code: block.code,
            reason: `${describeBlock(block)}: ${block.message}`,
            since: block.since,
          };
    if (JSON.stringify(next) === JSON.stringify(this.#blocked)) return;
    this.#blocked = next;
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
      blocked: this.#blocked,
    };
  }
}
