/**
 * A slot this agent holds (docs/fleet.md, "Holding a slot"): renewed every `renewIntervalMs`
 * while held; at the end of the update a failure is recorded in the fleet state, and the slot is
 * freed — after `settleSeconds` (still renewed) when the update succeeded. A renewal refused
 * because another node holds the slot, or none succeeding for a whole lease duration, marks the
 * slot lost: counted, logged, said in the result; the update goes on and the slot is left alone.
 */
import type { Logger } from 'pino';
import { describeError } from '../errors.js';
import type { Clock } from '../host/types.js';
import { isWriteConflict, type FleetObjects, type LeaseRecord, type LeaseSpecWrite } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import type { FleetState } from './fleet-state.js';
import type { FleetPolicy } from './policy.js';

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

export interface HoldSlotOptions {
  objects: Pick<FleetObjects, 'getLease' | 'replaceLease'>;
  state: Pick<FleetState, 'record'>;
  /** The holder identity: this node's name. */
  node: string;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  durationSeconds: number;
  renewIntervalMs: number;
  /** Aborted at shutdown: renewals stop and the slot expires by itself. */
  stopAll: AbortSignal;
}

/** The spec agentd writes into a slot Lease (an empty holder is a free slot). */
export function slotSpec(
  durationSeconds: number,
  holder: string | null,
  acquireTimeMs: number | null,
  renewTimeMs: number | null,
  transitions: number,
): LeaseSpecWrite {
  return { holder, durationSeconds, acquireTimeMs, renewTimeMs, transitions };
}

export function holdSlot(o: HoldSlotOptions, lease: LeaseRecord, policy: FleetPolicy): HeldSlot {
  const { objects, clock, node, metrics, logger, stopAll } = o;
  const durationS = o.durationSeconds;
  const renewMs = o.renewIntervalMs;
  const spec = (
    holder: string | null,
    acquireMs: number | null,
    renewAt: number | null,
    transitions: number,
  ) => slotSpec(durationS, holder, acquireMs, renewAt, transitions);
  let current = lease;
  let lost: string | null = null;
  let lastRenewOk = clock.now();
  const stopRenew = new AbortController();
  const onStopAll = (): void => stopRenew.abort();
  stopAll.addEventListener('abort', onStopAll, { once: true });

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
        markLost(`slot ${current.name} could not be renewed for ${durationS}s: it may have been taken over`);
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
      stopAll.removeEventListener('abort', onStopAll);
      if (outcome.state === 'failed' || outcome.state === 'rolled_back') {
        await o.state
          .record({
            node,
            operation: outcome.operationId,
            state: outcome.state,
            message: (outcome.message ?? '').slice(0, 500),
            at: new Date(clock.now()).toISOString(),
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
        stopAll.addEventListener('abort', onStop, { once: true });
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
          stopAll.removeEventListener('abort', onStop);
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
