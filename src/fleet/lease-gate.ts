/**
 * The fleet gate (docs/fleet.md, "The gate"): before an update drains or stops anything it waits
 * for no halt, no pause, an open window and a free slot, a coordination.k8s.io/v1 Lease
 * `agentd-slot-<i>` with i < maxConcurrent. A slot is taken with optimistic concurrency (create, or
 * update with the resourceVersion read; a 409 means someone else was first: try the next), renewed
 * while held, and released (holder cleared) when the update ends — after `settleSeconds` when it
 * succeeded. A holder that dies loses its slot when the Lease expires.
 *
 * A waiting update does not poll: it watches the slot Leases (slot-watch.ts) and the policy, and
 * looks again when a slot may have been freed, when the policy changes, when a held slot expires
 * (a timer at its expiry), while halted when the recorded failures change (`agentctl fleet
 * resume`), and, as a safety net, after a slow re-check interval.
 */
import type { Logger } from 'pino';
import { CancelledError, describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import {
  isAlreadyExists,
  isWriteConflict,
  type FleetObjects,
  type LeaseRecord,
  type LeaseSpecWrite,
} from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import { countFailures, type FleetFailure, type FleetState } from './fleet-state.js';
import type { FleetPolicySource } from './policy-watch.js';
import { SLOT_PREFIX, STATE_CONFIGMAP, type FleetPolicy } from './policy.js';
import { holdSlot, slotSpec, type HeldSlot } from './held-slot.js';
import { createSlotWatch, type SeenLease, type SlotWatch } from './slot-watch.js';
import { DEFAULT_LEASE_SECONDS, readSlots, type SlotView } from './slot-view.js';
import { anyWindowOpen, nextWindowOpen } from './windows.js';

export type { HeldSlot, SlotOutcome } from './held-slot.js';
export type { SlotView } from './slot-view.js';

export const WAIT_REASONS = ['WaitingForSlot', 'OutsideWindow', 'Paused', 'Halted'] as const;
export type WaitReason = (typeof WAIT_REASONS)[number];

/** Why an update waits, as the operation, `status` and the Machine condition show it. */
export interface GateWait {
  reason: WaitReason;
  message: string;
  /** When the update began to wait for this reason (ISO). */
  since: string;
}

export interface LeaseGateOptions {
  objects: Pick<
    FleetObjects,
    | 'listLeases'
    | 'watchLeases'
    | 'getLease'
    | 'createLease'
    | 'replaceLease'
    | 'watchConfigMap'
    | 'namespace'
  >;
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
  /**
   * The safety re-check: how often a waiting update looks again with no event (default 60 s,
   * less up to 20 % jitter). Slot releases, policy changes, expiries and (while halted) a change
   * of the recorded failures wake it sooner; this catches a watch that is down.
   */
  recheckIntervalMs?: number;
  /**
   * A waiter woken by a released slot waits a random part of this (default 1 s) before it tries,
   * so that the many agents woken by one release do not all write at once: the first takes the
   * slot, the others see it taken on their watch.
   */
  wakeJitterMs?: number;
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

/** The shortest wait for a held slot's expiry. */
const MIN_EXPIRY_WAIT_MS = 500;

/** A decision of one look at the gate. */
type Decision =
  | { wait: WaitReason; message: string; retryInMs?: number; failures?: FleetFailure[] }
  | { slot: LeaseRecord };

export function createLeaseGate(o: LeaseGateOptions): LeaseGate {
  const { objects, clock, node, metrics } = o;
  const logger = o.logger.child({ component: 'fleet-gate' });
  const durationS = o.leaseDurationSeconds ?? DEFAULT_LEASE_SECONDS;
  const renewMs = o.renewIntervalMs ?? 20_000;
  const recheckMs = o.recheckIntervalMs ?? 60_000;
  const wakeJitterMs = o.wakeJitterMs ?? 1_000;
  const random = o.random ?? Math.random;
  const stopAll = new AbortController();
  const watch: SlotWatch = createSlotWatch({ objects, clock, logger: o.logger });
  /** When this agent first saw each Lease at its current resourceVersion (skew-proof expiry). */
  const observed = new Map<string, { rv: string; atMs: number }>();

  const iso = (ms: number): string => new Date(ms).toISOString();

  function observe(l: LeaseRecord, seenAtMs = clock.now()): number {
    const seen = observed.get(l.name);
    if (seen?.rv === l.resourceVersion) return seen.atMs;
    observed.set(l.name, { rv: l.resourceVersion, atMs: seenAtMs });
    return seenAtMs;
  }

  /**
   * Expired when its renewTime is older than its duration, and this agent has seen it unchanged
   * for that long: a holder with a clock ahead cannot make a live lease look expired early
   * (client-go's leader election trusts only its own observation time the same way).
   */
  function isExpired(l: LeaseRecord, now: number, seenAtMs?: number): boolean {
    return l.holder !== null && expiresAt(l, seenAtMs) < now;
  }

  /** When `l` counts as expired for this agent (the later of both clocks' view). */
  function expiresAt(l: LeaseRecord, seenAtMs?: number): number {
    const durMs = (l.durationSeconds ?? durationS) * 1000;
    return Math.max(l.renewTimeMs ?? 0, observe(l, seenAtMs)) + durMs;
  }

  /** Whether slot `l` (undefined: it does not exist) could be taken by this agent now. */
  function takeable(l: SeenLease | undefined, now: number): boolean {
    if (l === undefined) return true;
    const { lease } = l;
    return lease.holder === node || lease.holder === null || isExpired(lease, now, l.seenAtMs);
  }

  const slotNames = (policy: FleetPolicy): string[] =>
    Array.from({ length: policy.maxConcurrent }, (_, i) => `${SLOT_PREFIX}${i}`);

  /** Milliseconds until the first slot held by another node expires (Infinity: none, or no view). */
  function untilNextExpiry(policy: FleetPolicy, now: number): number {
    const view = watch.snapshot();
    if (view === null) return Number.POSITIVE_INFINITY;
    let next = Number.POSITIVE_INFINITY;
    for (const name of slotNames(policy)) {
      const l = view.get(name);
      if (l === undefined || l.lease.holder === null || l.lease.holder === node) continue;
      next = Math.min(next, expiresAt(l.lease, l.seenAtMs) + 1 - now);
    }
    return Math.max(0, next);
  }

  const spec = (
    holder: string | null,
    acquireMs: number | null,
    renewAt: number | null,
    transitions: number,
  ): LeaseSpecWrite => slotSpec(durationS, holder, acquireMs, renewAt, transitions);
  const hold = (lease: LeaseRecord, policy: FleetPolicy): HeldSlot =>
    holdSlot(
      {
        objects,
        state: o.state,
        node,
        clock,
        logger,
        metrics,
        durationSeconds: durationS,
        renewIntervalMs: renewMs,
        stopAll: stopAll.signal,
      },
      lease,
      policy,
    );

  /**
   * Try every slot i < maxConcurrent once, starting at a random one; the held Lease, or null when
   * all are taken. `view` is the watch's (null: not in sync, so the slots are listed).
   */
  async function tryTake(
    policy: FleetPolicy,
    view: ReadonlyMap<string, SeenLease> | null,
  ): Promise<LeaseRecord | null> {
    const now = clock.now();
    const byName =
      view ?? new Map((await objects.listLeases()).map((l) => [l.name, { lease: l, seenAtMs: now }]));
    const names = slotNames(policy);
    // Start at a random slot, so agents that look at the same moment do not all race for slot 0.
    const first = Math.floor(random() * names.length);
    for (let k = 0; k < names.length; k += 1) {
      const name = names[(first + k) % names.length] as string;
      let seen = byName.get(name);
      if (!takeable(seen, now)) continue;
      try {
        if (seen === undefined) {
          try {
            return await objects.createLease(name, spec(node, now, now, 0));
          } catch (err) {
            if (!isAlreadyExists(err)) throw err;
            // It exists but was not in view: the view lags, or it is a slot an older agentd
            // wrote without the slot label. Read it by name; taking it writes the label.
            const lease = await objects.getLease(name);
            if (lease === null) continue;
            seen = { lease, seenAtMs: now };
            if (!takeable(seen, now)) continue;
          }
        }
        const l = seen.lease;
        const mine = l.holder === node;
        if (!mine && l.holder !== null)
          logger.warn({ slot: name, holder: l.holder }, 'taking over an expired slot');
        const transitions = mine ? l.transitions : l.transitions + 1;
        return await objects.replaceLease(name, l.resourceVersion, spec(node, now, now, transitions));
      } catch (err) {
        // Someone else was first: that slot is taken, try the next.
        if (isWriteConflict(err) || isAlreadyExists(err)) continue;
        throw err;
      }
    }
    return null;
  }

  /**
   * One look at the gate. `failures` are those read at the last full look; a look after a slot
   * event reuses them and reads them afresh only before it writes, so the many agents woken by
   * one release read nothing unless a slot looks free to them.
   */
  async function decide(policy: FleetPolicy, known: FleetFailure[] | null): Promise<Decision> {
    let failures = known ?? (await o.state.failures());
    const fresh = known === null;
    const halted = (): Decision | null => {
      const stop = failures.length >= policy.maxFailures;
      metrics.fleetHalted.set(stop ? 1 : 0);
      if (!stop) return null;
      const nodes = [...new Set(failures.map((f) => f.node))].slice(0, 5).join(', ');
      return {
        wait: 'Halted',
        message: `the rollout is halted: ${failures.length} recorded failures reach maxFailures ${policy.maxFailures} (${nodes}); clear them with agentctl fleet resume`,
        failures,
      };
    };
    const h = halted();
    if (h !== null) return h;
    if (policy.paused)
      return {
        wait: 'Paused',
        message: 'the fleet policy says paused: true (agentctl fleet resume)',
        failures,
      };
    const now = clock.now();
    if (!anyWindowOpen(policy.windows, now)) {
      const next = nextWindowOpen(policy.windows, now);
      return {
        wait: 'OutsideWindow',
        message: `outside every maintenance window; the next opens at ${next === null ? 'unknown' : iso(next)}`,
        ...(next !== null ? { retryInMs: Math.max(1000, next - now) } : {}),
        failures,
      };
    }
    const view = watch.snapshot();
    const anyFree = view === null || slotNames(policy).some((name) => takeable(view.get(name), now));
    if (anyFree) {
      if (!fresh) {
        // About to write: a failure recorded since the last full look may have halted the fleet.
        failures = await o.state.failures();
        const stop = halted();
        if (stop !== null) return stop;
      }
      const slot = await tryTake(policy, view);
      if (slot !== null) return { slot };
    }
    return {
      wait: 'WaitingForSlot',
      message: `all ${policy.maxConcurrent} slots (maxConcurrent) are held by other nodes`,
      failures,
    };
  }

  /**
   * Resolves when the recorded failures change after a halt decision (a resume empties them),
   * when the server ends the watch (the caller looks again and watches anew), or when `signal`
   * aborts. A watch that cannot start or fails leaves the wait to the re-check.
   */
  function failuresChange(signal: AbortSignal, halting: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      let finished = false;
      let stopWatch: (() => void) | null = null;
      const done = (): void => {
        if (finished) return;
        finished = true;
        signal.removeEventListener('abort', done);
        stopWatch?.();
        stopWatch = null;
        resolve();
      };
      signal.addEventListener('abort', done, { once: true });
      objects
        .watchConfigMap(
          STATE_CONFIGMAP,
          // The list is the state after the look that decided the halt: a resume in between
          // shows here as fewer failures (or no ConfigMap).
          (cm) => {
            if (cm === null || countFailures(cm.data) < halting) done();
          },
          () => done(),
          (err) => {
            if (err === null) done();
            else logger.debug({ err: describeError(err) }, 'watch of the fleet failures failed');
          },
        )
        .then(
          (stop) => {
            // Ended before the watch was set up (its list already answered): stop it now.
            if (finished) stop();
            else stopWatch = stop;
          },
          (err: unknown) => logger.debug({ err: describeError(err) }, 'cannot watch the fleet failures'),
        );
    });
  }

  /**
   * Wait for the next reason to look again: a slot event, a policy change, the first expiry of a
   * held slot, a change of the failures that halt, the decision's own retry time, or the safety
   * re-check.
   */
  async function sleepUntilWoken(
    signal: AbortSignal,
    decision: Exclude<Decision, { slot: LeaseRecord }>,
    policy: FleetPolicy | null,
  ): Promise<'slot' | 'policy' | 'timer' | 'failures'> {
    const jittered = Math.round(recheckMs * (0.8 + 0.2 * random()));
    // At least half a second: a slot that has expired but could not be taken (its update was
    // refused) must not make the wait a busy loop.
    const expiry =
      policy !== null && decision.wait === 'WaitingForSlot'
        ? Math.max(MIN_EXPIRY_WAIT_MS, untilNextExpiry(policy, clock.now()))
        : Number.POSITIVE_INFINITY;
    const timerMs = Math.min(decision.retryInMs ?? jittered, jittered, expiry);
    const woke = new AbortController();
    const until = AbortSignal.any([signal, woke.signal]);
    try {
      return await Promise.race([
        clock.sleep(timerMs, until).then(
          () => 'timer' as const,
          () => 'timer' as const,
        ),
        watch.next(until).then(() => 'slot' as const),
        ...(o.policy.nextChange ? [o.policy.nextChange(until).then(() => 'policy' as const)] : []),
        ...(decision.wait === 'Halted'
          ? [failuresChange(until, decision.failures?.length ?? 0).then(() => 'failures' as const)]
          : []),
      ]);
    } finally {
      woke.abort();
    }
  }

  return {
    async acquire({ signal, operationId, onWait }) {
      const started = clock.now();
      let waiting = null as GateWait | null;
      const log = logger.child({ operation: operationId });
      /** Released when this acquire ends: the slot watch runs only while someone waits. */
      let unuse: (() => void) | null = null;
      /** The failures of the last full look; null: the next look reads them. */
      let failures: FleetFailure[] | null = null;
      try {
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
              message:
                ps.error === null
                  ? 'reading the fleet policy from the Kubernetes API server'
                  : waitingForApi('the fleet policy', ps.error, operationId),
              retryInMs: 200,
            };
          } else if (ps.policy === null) {
            if (waiting !== null) onWait(null);
            return null;
          } else {
            unuse ??= watch.use();
            try {
              decision = await decide(ps.policy, failures);
            } catch (err) {
              // The API is unreachable or the state unreadable: never update blind, look again.
              decision = {
                wait: 'WaitingForSlot',
                message: waitingForApi('the fleet state', describeError(err), operationId),
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
          const woken = await sleepUntilWoken(signal, decision, ps.policy);
          // A look after a slot event reuses what the last full look read; any other reads afresh.
          failures = woken === 'slot' ? (decision.failures ?? null) : null;
          if (woken === 'slot' && decision.wait === 'WaitingForSlot') {
            // Spread the agents one release woke: the first to try takes the slot, the others
            // see it taken on their watch before their turn and write nothing.
            const jitterMs = Math.round(random() * wakeJitterMs);
            if (jitterMs > 0) await clock.sleep(jitterMs, signal).catch(() => undefined);
          }
        }
      } finally {
        unuse?.();
      }
    },
    slots: () => readSlots(objects, clock, durationS),
    stop() {
      stopAll.abort();
      void watch.stop();
    },
  };
}

/**
 * Why an update waits when the API server does not answer the gate's reads: it is the API
 * server that is waited for, and the message says the way on without the gate (docs/fleet.md).
 */
function waitingForApi(what: string, error: string, operationId: string): string {
  return `waiting for the Kubernetes API server: cannot read ${what}: ${error}; the update goes on once it answers. To update this node without the fleet gate: agentctl ops cancel ${operationId}, then agentctl update --ignore-fleet`;
}
