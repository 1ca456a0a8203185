/**
 * Polling on the injected clock for the machine lifecycle: probe, sleep one interval, until a
 * deadline, with cancellation turned into `CancelledError`.
 */
import { AgentError, CancelledError } from '../errors.js';
import { sleepOrCancel } from '../retry/backoff.js';
import type { Clock } from './types.js';

/** True for the error of a cancelled step (which polls must pass on, never swallow). */
export function isCancelled(err: unknown): boolean {
  return err instanceof AgentError && err.code === 'CANCELLED';
}

/** Throw `CancelledError` for `what` when `signal` is aborted. */
export function throwIfCancelled(signal: AbortSignal | undefined, what: string): void {
  if (signal?.aborted) throw new CancelledError(what, { cause: signal.reason });
}

export interface PollOptions {
  clock: Clock;
  /** Clock time after which the poll gives up. */
  deadline: number;
  intervalMs: number;
  /**
   * The first sleep, doubled after each probe up to `intervalMs` (default: `intervalMs` from the
   * start). For waits that usually end within a fraction of a second, such as a machine's bus
   * after `machinectl start` (0.3–0.5 s on real systemd), where a full interval is pure delay.
   */
  firstIntervalMs?: number;
  signal?: AbortSignal;
  /** What is being waited for, for the cancellation message. */
  what: string;
}

/**
 * Call `probe` until it returns true (→ true) or the deadline passes (→ false). The probe runs
 * at least once, and once more at the deadline, so a short timeout still gets a last look.
 */
export async function pollUntil(options: PollOptions, probe: () => Promise<boolean>): Promise<boolean> {
  const { clock, deadline, intervalMs, signal, what } = options;
  let next = Math.min(options.firstIntervalMs ?? intervalMs, intervalMs);
  for (;;) {
    throwIfCancelled(signal, what);
    if (await probe()) return true;
    const remaining = deadline - clock.now();
    if (remaining <= 0) return false;
    await sleepOrCancel(clock, Math.min(next, remaining), signal, what);
    next = Math.min(next * 2, intervalMs);
  }
}
