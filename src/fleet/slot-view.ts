/**
 * The slots as `fleet status` shows them (docs/fleet.md, "Operating the fleet"): every Lease
 * `agentd-slot-<i>` of the namespace with its holder and when it expires, read by a node's agentd
 * and by an operator's agentctl alike.
 */
import type { Clock } from '../host/types.js';
import type { FleetObjects, LeaseRecord } from '../kube/index.js';
import { SLOT_PREFIX } from './policy.js';

/** The duration agentd writes into the slots it holds (docs/fleet.md, "Holding a slot"). */
export const DEFAULT_LEASE_SECONDS = 60;

export interface SlotView {
  name: string;
  holder: string | null;
  renewTime: string | null;
  expiresAt: string | null;
  expired: boolean;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The slots among `leases` at `nowMs`; a Lease without a duration counts `durationS`. */
export function slotViews(
  leases: readonly LeaseRecord[],
  nowMs: number,
  durationS = DEFAULT_LEASE_SECONDS,
): SlotView[] {
  return leases
    .filter((l) => l.name.startsWith(SLOT_PREFIX))
    .map((l) => {
      const expiresMs =
        l.renewTimeMs === null ? null : l.renewTimeMs + (l.durationSeconds ?? durationS) * 1000;
      return {
        name: l.name,
        holder: l.holder,
        renewTime: l.renewTimeMs === null ? null : iso(l.renewTimeMs),
        expiresAt: l.holder === null || expiresMs === null ? null : iso(expiresMs),
        expired: l.holder !== null && expiresMs !== null && expiresMs < nowMs,
      };
    });
}

/** List the namespace's Leases and show its slots (labelled or not: see FleetObjects.listLeases). */
export async function readSlots(
  objects: Pick<FleetObjects, 'listLeases'>,
  clock: Pick<Clock, 'now'>,
  durationS = DEFAULT_LEASE_SECONDS,
): Promise<SlotView[]> {
  const leases = await objects.listLeases();
  return slotViews(leases, clock.now(), durationS);
}
