/**
 * The waiting agents' view of the slot Leases (docs/fleet.md, "The gate"): a list+watch of the
 * Leases with agentd's slot label, run only while an update waits in the gate, so an idle agent
 * keeps just its policy watch. A watch that ends is listed and watched again at once; one that
 * fails is retried after the one watch backoff (src/retry). Waiters are woken when a slot may
 * have become free — a holder changed or a slot went away, or a fresh list — and not at each
 * renewal, which only moves the expiry the waiter times itself.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import type { FleetObjects, LeaseRecord, LeaseWatchEvent } from '../kube/index.js';
import { watchFailure, watchOnce } from '../kube/watch-once.js';
import { Backoff, WATCH_BACKOFF, type BackoffPolicy } from '../retry/backoff.js';
import { Pulse } from './pulse.js';

/** A slot Lease as the watch delivered it, and when this agent first saw that resourceVersion. */
export interface SeenLease {
  lease: LeaseRecord;
  seenAtMs: number;
}

export interface SlotWatch {
  /** Need the watch (start it if it does not run); the returned function ends this need. */
  use(): () => void;
  /** The slot Leases by name, or null while the watch is not in sync (starting, failed, re-listing). */
  snapshot(): ReadonlyMap<string, SeenLease> | null;
  /** Resolves when a slot may have been freed (or the view was re-listed), or when `signal` aborts. */
  next(signal: AbortSignal): Promise<void>;
  /** End the watch for good (shutdown). */
  stop(): Promise<void>;
}

export interface SlotWatchOptions {
  objects: Pick<FleetObjects, 'watchLeases' | 'namespace'>;
  clock: Clock;
  logger: Logger;
  backoff?: BackoffPolicy;
}

export function createSlotWatch(o: SlotWatchOptions): SlotWatch {
  const logger = o.logger.child({ component: 'fleet-slots' });
  const pulse = new Pulse();
  let cache = new Map<string, SeenLease>();
  let synced = false;
  let users = 0;
  let stopped = false;
  /** Aborted when nobody needs the watch any more, or at stop: ends the current watch or backoff. */
  let idle = new AbortController();
  let loop: Promise<void> | null = null;

  function seen(lease: LeaseRecord): SeenLease {
    const prev = cache.get(lease.name);
    const seenAtMs = prev?.lease.resourceVersion === lease.resourceVersion ? prev.seenAtMs : o.clock.now();
    return { lease, seenAtMs };
  }

  function onList(leases: LeaseRecord[]): void {
    cache = new Map(leases.map((l) => [l.name, seen(l)]));
    synced = true;
    pulse.fire();
  }

  function onEvent(e: LeaseWatchEvent): void {
    if (e.type === 'DELETED') {
      cache.delete(e.name);
      pulse.fire();
      return;
    }
    const before = cache.get(e.lease.name)?.lease.holder;
    cache.set(e.lease.name, seen(e.lease));
    // A renewal (same holder) frees nothing; a new, freed or taken-over slot may.
    if (before === undefined || before !== e.lease.holder) pulse.fire();
  }

  async function run(): Promise<void> {
    const backoff = new Backoff(o.backoff ?? WATCH_BACKOFF);
    while (users > 0 && !stopped) {
      const { signal } = idle;
      let failed: unknown;
      try {
        const run = await watchOnce(
          (onDone, delivered) =>
            o.objects.watchLeases(
              onList,
              (e) => {
                delivered();
                onEvent(e);
              },
              onDone,
            ),
          signal,
          { clock: o.clock },
        );
        if (run.established) backoff.reset();
        failed = watchFailure(run, `the slot Leases in ${o.objects.namespace}`);
      } finally {
        synced = false;
      }
      if (failed !== null && !signal.aborted) {
        const retryInMs = backoff.next();
        logger.warn(
          { err: describeError(failed), retryInMs },
          `watch of the slot Leases in ${o.objects.namespace} failed`,
        );
        await o.clock.sleep(retryInMs, signal).catch(() => undefined);
      }
    }
  }

  return {
    use() {
      users += 1;
      // Needed again: a watch still winding down from the last idle picks this one up.
      if (idle.signal.aborted && !stopped) idle = new AbortController();
      if (loop === null && !stopped) {
        loop = run().finally(() => {
          loop = null;
        });
      }
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        users -= 1;
        if (users === 0) idle.abort();
      };
    },
    snapshot: () => (synced ? cache : null),
    next: (signal) => pulse.next(signal),
    async stop() {
      stopped = true;
      idle.abort();
      await loop;
    },
  };
}
