/**
 * The version of what `status` shows (see docs/architecture.md, "The status path"). Every input
 * of the answer bumps it after it changes: the node snapshot, operation events and the running
 * operation, startup recovery and a pending uncordon, the cordon state, the watcher, and the
 * daemon's own state. The `status` method serializes its answer once per version, so an input
 * that changes without a bump would be served stale: the status tests change each input alone
 * and expect a different answer.
 */
import type { Clock } from '../host/types.js';

export class StatusVersion {
  #value = 0;
  #expiry: { at: number; clock: Pick<Clock, 'now'> } | null = null;

  /** The current version; read it before reading what it covers. */
  get value(): number {
    // An input that ages (the node snapshot) moves the version on by itself once it is old:
    // checked here, on the caller's clock, instead of by a timer.
    if (this.#expiry !== null && this.#expiry.clock.now() >= this.#expiry.at) {
      this.#expiry = null;
      this.#value += 1;
    }
    return this.#value;
  }

  /**
   * What `status` shows gets old `ms` from now on `clock`: the version moves on then, without a
   * change, so the next `status` is answered afresh. A later call replaces the deadline.
   */
  expireAfter(ms: number, clock: Pick<Clock, 'now'>): void {
    this.#expiry = { at: clock.now() + ms, clock };
  }

  /** Something `status` shows has changed (call it after the change, not before). */
  readonly bump = (): void => {
    this.#value += 1;
  };

  /** A value `status` shows: setting it bumps the version. */
  cell<T>(initial: T): StatusCell<T> {
    let value = initial;
    return {
      get: () => value,
      set: (next) => {
        value = next;
        this.bump();
      },
    };
  }
}

/** A value shown by `status`, whose every change bumps the `StatusVersion` it came from. */
export interface StatusCell<T> {
  get(): T;
  set(value: T): void;
}
