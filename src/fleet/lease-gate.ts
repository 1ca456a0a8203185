/**
 * The fleet gate (docs/fleet.md, "The gate"): before an update drains or stops anything it waits
 * for no halt, no pause, an open window and a free slot, a coordination.k8s.io/v1 Lease
 * `agentd-slot-<i>` with i < maxConcurrent. A slot is taken with optimistic concurrency (create, or
 * update with the resourceVersion read; a 409 means someone else was first: try the next), renewed
 * while held, and released (holder cleared) when the update ends — after `settleSeconds` when it
 * succeeded. A holder that dies loses its slot when the Lease expires.
 */
import type { Logger } from 'pino';
import { CancelledError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { isAlreadyExists, isWriteConflict, type FleetObjects, type LeaseRecord } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import type { FleetState } from './fleet-state.js';
import type { FleetPolicySource } from './policy-watch.js';
import { SLOT_PREFIX, type FleetPolicy } from './policy.js';
import { anyWindowOpen, nextWindowOpen } from './windows.js';

export const WAIT_REASONS = ['WaitingForSlot', 'OutsideWindow', 'Paused', 'Halted'] as const;
export type WaitReason = (typeof WAIT_REASONS)[number];

/** Why an update waits, as the operation, `status` and the Machine condition show it. */
export interface GateWait {
  reason: WaitReason;
  message: string;
  /** When the update began to wait for this reason (ISO). */
  since: string;
}

/** How an update that held a slot ended. */
export interface SlotOutcome {
  state: string;
  operationId: string;
  message: string | null;
}

export interface HeldSlot {
  readonly name: string;
  /** Why this agent no longer holds the slot it took (taken over, not renewed in time), else null. */
  lostReason(): string | null;
  /** End the hold: record a failure, keep the slot for `settleSeconds` after a success, then free it. */
  release(outcome: SlotOutcome): Promise<void>;
}

export interface LeaseGateOptions {
  objects: Pick<FleetObjects, 'listLeases' | 'getLease' | 'createLease' | 'replaceLease'>;
  policy: FleetPolicySource;
  state: Pick<FleetState, 'failures' | 'record'>;
  /** The holder identity: this node's name. */
  node: string;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /** Lease duration written into slots (default 60 s). */
  leaseDurationSeconds?: number;
  /** How often a held slot is renewed (default 20 s: three renewals per duration). */
  renewIntervalMs?: number;
  /** How often a waiting update looks again (default 30 s, with up to 20 % jitter). */
  pollIntervalMs?: number;
  /** Random source in [0, 1) for the jitter and the first slot tried (default Math.random). */
  random?: () => number;
}

export interface LeaseGate {
  /**
   * Wait until this node may update, then hold a slot. Returns null when there is no policy (no
   * `agentd-fleet` ConfigMap): no gate. Rejects with CANCELLED when `signal` aborts.
   */
  acquire(o: {
    signal: AbortSignal;
    operationId: string;
    onWait: (w: GateWait | null) => void;
  }): Promise<HeldSlot | null>;
  /** Slots as last listed, with this agent's view of their expiry. */
  slots(): Promise<SlotView[]>;
  /** Stop renewing (shutdown): held slots then expire by themselves. */
  stop(): void;
}

export interface SlotView {
  name: string;
  holder: string | null;
  renewTime: string | null;
  expiresAt: string | null;
  expired: boolean;
}

/** A decision of one look at the gate. */
type Decision = { wait: WaitReason; message: string; retryInMs?: number } | { slot: LeaseRecord };

export function createLeaseGate(o: LeaseGateOptions): LeaseGate {
  const { objects, clock, node, metrics } = o;
  const logger = o.logger.child({ component: 'fleet-gate' });
  const durationS = o.leaseDurationSeconds ?? 60;
  const renewMs = o.renewIntervalMs ?? 20_000;
  const pollMs = o.pollIntervalMs ?? 30_000;
  const random = o.random ?? Math.random;
  const stopAll = new AbortController();
  /** When this agent first saw each Lease at its current resourceVersion (skew-proof expiry). */
  const observed = new Map<string, { rv: string; atMs: number }>();

  const iso = (ms: number): string => new Date(ms).toISOString();

  function observe(l: LeaseRecord): number {
    const seen = observed.get(l.name);
    if (seen?.rv === l.resourceVersion) return seen.atMs;
    observed.set(l.name, { rv: l.resourceVersion, atMs: clock.now() });
    return clock.now();
  }

  /**
   * Expired when its renewTime is older than its duration, and this agent has seen it unchanged
   * for that long: a holder with a clock ahead cannot make a live lease look expired early
   * (client-go's leader election trusts only its own observation time the same way).
   */
  function isExpired(l: LeaseRecord, now: number): boolean {
    if (l.holder === null) return false;
    const durMs = (l.durationSeconds ?? durationS) * 1000;
    const seenAt = observe(l);
    const renewed = l.renewTimeMs ?? 0;
    return now - renewed > durMs && now - seenAt > durMs;
  }

  const spec = (
    holder: string | null,
    acquireMs: number | null,
    renewMsAt: number | null,
    transitions: number,
  ) => ({
    holder,
    durationSeconds: durationS,
    acquireTimeMs: acquireMs,
    renewTimeMs: renewMsAt,
    transitions,
  });

  /** Try every slot i < maxConcurrent once; the held Lease, or null when all are taken. */
  async function tryTake(policy: FleetPolicy): Promise<LeaseRecord | null> {
    const now = clock.now();
    const byName = new Map((await objects.listLeases()).map((l) => [l.name, l]));
    const n = policy.maxConcurrent;
    // Start at a random slot, so agents that look at the same moment do not all race for slot 0.
    const first = Math.floor(random() * n);
    for (let k = 0; k < n; k += 1) {
      const name = `${SLOT_PREFIX}${(first + k) % n}`;
      const l = byName.get(name);
      try {
        if (l === undefined) return await objects.createLease(name, spec(node, now, now, 0));
        const mine = l.holder === node;
        if (mine || l.holder === null || isExpired(l, now)) {
          if (!mine && l.holder !== null)
            logger.warn({ slot: name, holder: l.holder }, 'taking over an expired slot');
          const transitions = mine ? l.transitions : l.transitions + 1;
          return await objects.replaceLease(name, l.resourceVersion, spec(node, now, now, transitions));
        }
      } catch (err) {
        // Someone else was first: that slot is taken, try the next.
        if (isWriteConflict(err) || isAlreadyExists(err)) continue;
        throw err;
      }
    }
    return null;
  }

  async function decide(policy: FleetPolicy): Promise<Decision> {
    const failures = await o.state.failures();
    const halted = failures.length >= policy.maxFailures;
    metrics.fleetHalted.set(halted ? 1 : 0);
    if (halted) {
      const nodes = [...new Set(failures.map((f) => f.node))].slice(0, 5).join(', ');
      return {
        wait: 'Halted',
        message: `the rollout is halted: ${failures.length} recorded failures reach maxFailures ${policy.maxFailures} (${nodes}); clear them with agentctl fleet resume`,
      };
    }
    if (policy.paused)
      return { wait: 'Paused', message: 'the fleet policy says paused: true (agentctl fleet resume)' };
    const now = clock.now();
    const open = anyWindowOpen(policy.windows, now);
    metrics.fleetWindowOpen.set(open ? 1 : 0);
    if (!open) {
      const next = nextWindowOpen(policy.windows, now);
      return {
        wait: 'OutsideWindow',
        message: `outside every maintenance window; the next opens at ${next === null ? 'unknown' : iso(next)}`,
        ...(next !== null ? { retryInMs: Math.max(1000, next - now) } : {}),
      };
    }
    const slot = await tryTake(policy);
    if (slot !== null) return { slot };
    return {
      wait: 'WaitingForSlot',
      message: `all ${policy.maxConcurrent} slots (maxConcurrent) are held by other nodes`,
    };
  }

  function hold(lease: LeaseRecord, policy: FleetPolicy): HeldSlot {
    let current = lease;
    let lost: string | null = null;
    let lastRenewOk = clock.now();
    const stopRenew = new AbortController();
    const onStopAll = (): void => stopRenew.abort();
    stopAll.signal.addEventListener('abort', onStopAll, { once: true });

    const markLost = (why: string): void => {
      if (lost !== null) return;
      lost = why;
      metrics.fleetSlotLost.inc();
      logger.error({ slot: current.name, reason: why }, 'this node lost its fleet slot; the update goes on');
    };

    async function renewOnce(): Promise<void> {
      const now = clock.now();
      try {
        current = await objects.replaceLease(
          current.name,
          current.resourceVersion,
          spec(node, current.acquireTimeMs, now, current.transitions),
        );
        lastRenewOk = now;
      } catch (err) {
        if (isWriteConflict(err)) {
          const fresh = await objects.getLease(current.name).catch(() => null);
          if (fresh !== null && fresh.holder === node) {
            current = fresh; // a write of ours we did not see the answer of: renew from it next time
            return;
          }
          markLost(`slot ${current.name} is now held by ${fresh?.holder ?? 'nobody'}`);
          return;
        }
        logger.warn({ slot: current.name, err: describeError(err) }, 'renewing the fleet slot failed');
        if (now - lastRenewOk > durationS * 1000) {
          markLost(
            `slot ${current.name} could not be renewed for ${durationS}s: it may have been taken over`,
          );
        }
      }
    }

    const renewing = (async () => {
      while (!stopRenew.signal.aborted && lost === null) {
        try {
          await clock.sleep(renewMs, stopRenew.signal);
        } catch {
          return;
        }
        await renewOnce();
      }
    })();

    async function free(): Promise<void> {
      for (let attempt = 0; attempt < 3 && lost === null; attempt += 1) {
        try {
          await objects.replaceLease(
            current.name,
            current.resourceVersion,
            spec(null, null, null, current.transitions),
          );
          return;
        } catch (err) {
          if (!isWriteConflict(err)) throw err;
          const fresh = await objects.getLease(current.name);
          if (fresh === null || fresh.holder !== node) return;
          current = fresh;
        }
      }
    }

    return {
      name: lease.name,
      lostReason: () => lost,
      async release(outcome) {
        stopRenew.abort();
        await renewing;
        stopAll.signal.removeEventListener('abort', onStopAll);
        if (outcome.state === 'failed' || outcome.state === 'rolled_back') {
          await o.state
            .record({
              node,
              operation: outcome.operationId,
              state: outcome.state,
              message: (outcome.message ?? '').slice(0, 500),
              at: iso(clock.now()),
            })
            .catch((err: unknown) =>
              logger.error(
                { err: describeError(err) },
                'recording the failed update in the fleet state failed',
              ),
            );
        }
        if (lost !== null) return;
        const settleMs = outcome.state === 'succeeded' ? policy.settleSeconds * 1000 : 0;
        if (settleMs > 0) {
          // Keep the slot (renewed) while the node settles; the operation does not wait for it.
          const settle = new AbortController();
          const onStop = (): void => settle.abort();
          stopAll.signal.addEventListener('abort', onStop, { once: true });
          void (async () => {
            const until = clock.now() + settleMs;
            while (!settle.signal.aborted && lost === null && clock.now() < until) {
              try {
                await clock.sleep(Math.min(renewMs, until - clock.now()), settle.signal);
              } catch {
                return; // shutdown: the slot expires by itself
              }
              if (clock.now() < until) await renewOnce();
            }
            stopAll.signal.removeEventListener('abort', onStop);
            if (!settle.signal.aborted)
              await free().catch((err: unknown) =>
                logger.warn({ err: describeError(err) }, 'freeing the fleet slot failed'),
              );
          })();
          return;
        }
        await free().catch((err: unknown) =>
          logger.warn({ err: describeError(err) }, 'freeing the fleet slot failed; it expires by itself'),
        );
      },
    };
  }

  return {
    async acquire({ signal, operationId, onWait }) {
      const started = clock.now();
      let waiting = null as GateWait | null;
      const log = logger.child({ operation: operationId });
      for (;;) {
        if (signal.aborted) {
          metrics.fleetSlotWait.observe({ result: 'cancelled' }, (clock.now() - started) / 1000);
          throw new CancelledError('wait for a fleet slot', { cause: signal.reason });
        }
        const ps = o.policy.state();
        let decision: Decision;
        if (!ps.synced) {
          decision = {
            wait: 'WaitingForSlot',
            message: `reading the fleet policy${ps.error !== null ? `: ${ps.error}` : ''}`,
            retryInMs: 200,
          };
        } else if (ps.policy === null) {
          if (waiting !== null) onWait(null);
          return null;
        } else {
          try {
            decision = await decide(ps.policy);
          } catch (err) {
            // The API is unreachable or the state unreadable: never update blind, look again.
            decision = {
              wait: 'WaitingForSlot',
              message: `cannot read the fleet state: ${describeError(err)}`,
            };
          }
        }
        if ('slot' in decision) {
          metrics.fleetGateDecisions.inc({ result: 'acquired', reason: 'Acquired' });
          metrics.fleetSlotWait.observe({ result: 'acquired' }, (clock.now() - started) / 1000);
          if (waiting !== null) onWait(null);
          log.info({ slot: decision.slot.name }, 'took a fleet slot');
          return hold(decision.slot, ps.policy as FleetPolicy);
        }
        metrics.fleetGateDecisions.inc({ result: 'wait', reason: decision.wait });
        if (waiting?.reason !== decision.wait || waiting.message !== decision.message) {
          waiting = {
            reason: decision.wait,
            message: decision.message,
            since: waiting?.reason === decision.wait ? waiting.since : iso(clock.now()),
          };
          log.info({ reason: decision.wait, message: decision.message }, 'waiting in the fleet gate');
          onWait(waiting);
        }
        const jittered = Math.round(pollMs * (0.8 + 0.2 * random()));
        try {
          await clock.sleep(Math.min(decision.retryInMs ?? jittered, jittered), signal);
        } catch {
          // Aborted: the loop's top says CANCELLED.
        }
      }
    },
    async slots() {
      const now = clock.now();
      return (await objects.listLeases())
        .filter((l) => l.name.startsWith(SLOT_PREFIX))
        .map((l) => {
          const expiresMs =
            l.renewTimeMs === null ? null : l.renewTimeMs + (l.durationSeconds ?? durationS) * 1000;
          return {
            name: l.name,
            holder: l.holder,
            renewTime: l.renewTimeMs === null ? null : iso(l.renewTimeMs),
            expiresAt: l.holder === null || expiresMs === null ? null : iso(expiresMs),
            expired: l.holder !== null && expiresMs !== null && expiresMs < now,
          };
        });
    },
    stop() {
      stopAll.abort();
    },
  };
}
