/**
 * While the watcher's update runs, say on the Machine why it waits (docs/watcher.md, conditions):
 * the operation's `wait` (the fleet gate: WaitingForSlot, OutsideWindow, Paused, Halted) becomes
 * `NodeUpdated=False` with that reason, and back to `InProgress` when the wait ends. It polls
 * `status` through the rpc client (in process, cheap) and writes only on a change.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import type { RpcClient } from '../rpc/client.js';
import { clip } from './machine-status-writes.js';
import type { WantedStatus } from './machine-status-writes.js';

export interface WaitReporterOptions {
  rpc: RpcClient;
  clock: Clock;
  logger: Logger;
  /** The update's idempotency key (prefix): only our own operation is reported. */
  key: string;
  /** What `NodeUpdated=False/InProgress` says when the update does not wait. */
  summary: string;
  write: (want: WantedStatus, signal: AbortSignal) => Promise<unknown>;
  /** How often to look (default 2 s). */
  pollMs?: number;
}

/** Start reporting; the returned function stops it and waits for the last write. */
export function reportWaits(o: WaitReporterOptions, outer: AbortSignal): () => Promise<void> {
  const stop = new AbortController();
  const signal = AbortSignal.any([outer, stop.signal]);
  const pollMs = o.pollMs ?? 2_000;
  let shown: string | null = null;
  const loop = (async () => {
    while (!signal.aborted) {
      try {
        await o.clock.sleep(pollMs, signal);
      } catch {
        return;
      }
      try {
        const status = await o.rpc.call('status');
        const op = status.operation;
        if (op === null || !op.idempotencyKey?.startsWith(o.key)) continue;
        const wait = op.wait ?? null;
        const key = wait === null ? null : `${wait.reason}\n${wait.message}`;
        if (key === shown || signal.aborted) continue;
        await o.write(
          {
            nodeUpdated:
              wait === null
                ? { status: 'False', reason: 'InProgress', message: clip(o.summary) }
                : { status: 'False', reason: wait.reason, message: clip(wait.message) },
          },
          signal,
        );
        shown = key;
      } catch (err) {
        if (!signal.aborted)
          o.logger.warn({ err: describeError(err) }, 'reporting the update wait on the Machine');
      }
    }
  })();
  return async () => {
    stop.abort();
    await loop;
  };
}
