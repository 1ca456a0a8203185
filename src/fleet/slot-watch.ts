/**
 * The waiting agents' view of the slot Leases (docs/fleet.md, "The gate"): a list+watch of the
 * Leases with agentd's slot label, run only while an update waits in the gate, so an idle agent
 * keeps just its policy watch. The one reflector of src/kube (src/kube/reflector.ts) runs it: a
 * watch that ends resumes from the last resourceVersion, a 410 lists again, a failure waits the
 * one watch backoff (src/retry). The view is in sync from a list while the watch is open. Waiters are woken when a slot may
 * have become free — a holder changed or a slot went away, or a fresh list — and not at each
 * renewal, which only moves the expiry the waiter times itself.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { createReflector, type FleetObjects, type LeaseRecord, type Reflector } from '../kube/index.js';
import { WATCH_BACKOFF, type BackoffPolicy } from '../retry/backoff.js';
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

  let listed = false;
  function onList(leases: LeaseRecord[]): void {
    cache = new Map(leases.map((l) => [l.name, seen(l)]));
    listed = true;
    pulse.fire();
  }

  function onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', lease: LeaseRecord): void {
    if (type === 'DELETED') {
      cache.delete(lease.name);
      pulse.fire();
      return;
    }
    const before = cache.get(lease.name)?.lease.holder;
    cache.set(lease.name, seen(lease));
    // A renewal (same holder) frees nothing; a new, freed or taken-over slot may.
    if (before === undefined || before !== lease.holder) pulse.fire();
  }

  /** One run of the reflector, from a list, while the watch is needed. */
  async function run(signal: AbortSignal): Promise<void> {
    listed = false;
    const what = `the slot Leases in ${o.objects.namespace}`;
    const reflector: Reflector = createReflector<LeaseRecord>({
      ...o.objects.watchLeases(),
      onList,
      onEvent,
      onConnected: (connected) => {
        // The view is current from a list while the watch that follows it is open.
        synced = connected && listed;
        if (synced) pulse.fire();
      },
      onFailure: (err, retryInMs) => {
        synced = false;
        logger.warn({ err: describeError(err), retryInMs }, `watch of ${what} failed`);
      },
      onDecodeError: (err) =>
        logger.warn({ err: err.message }, `a watch event of ${what} could not be decoded`),
      clock: o.clock,
      backoff: o.backoff ?? WATCH_BACKOFF,
    });
    try {
      await reflector.start(signal);
    } finally {
      synced = false;
    }
  }

  async function loopWhileUsed(): Promise<void> {
    while (users > 0 && !stopped) await run(idle.signal);
  }

  return {
    use() {
      users += 1;
      // Needed again: a watch still winding down from the last idle picks this one up.
      if (idle.signal.aborted && !stopped) idle = new AbortController();
      if (loop === null && !stopped) {
        loop = loopWhileUsed().finally(() => {
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
