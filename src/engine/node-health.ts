/**
 * The node health model (docs/operations.md, "Is the node serving?"): the node serves only when
 * its active machine runs and that machine's kubelet is active and answers its health endpoint.
 * This is about the node; `/readyz` is about agentd itself.
 */
import type { MachineName } from '../host/types.js';
import type { MachineStatus } from './operation.js';

/** One machine as the health model needs it: `status`'s fields plus the health probe. */
export interface MachineHealth extends MachineStatus {
  /** kubelet's health endpoint answered ok (only probed while kubelet is active). */
  healthy: boolean;
}

export interface NodeServing {
  serving: boolean;
  /** Why the node does not serve; null while it serves. */
  servingReason: string | null;
}

/** Why the node is not known before agentd has read it at start (nothing to recover). */
export const NODE_NOT_READ_YET = 'agentd is starting and has not read the node yet; try again shortly';

/** Why the node is not known while startup recovery completes `operation`, which a restart interrupted. */
export function recoveringReason(operation: { id: string; kind: string }): string {
  return `agentd is recovering the node after a restart: operation ${operation.id} (${operation.kind}) was interrupted; try again shortly`;
}

/**
 * Decide whether the node serves, and say why not. `unknownBecause`: the node is not known yet
 * (agentd is starting), and why.
 */
export function assessServing(
  active: MachineName | null,
  machines: readonly MachineHealth[],
  options: { unknownBecause?: string | null } = {},
): NodeServing {
  const no = (servingReason: string): NodeServing => ({ serving: false, servingReason });
  if (options.unknownBecause) return no(options.unknownBecause);
  if (active === null) return no('the node has not joined: no machine is active');
  const m = machines.find((x) => x.name === active);
  if (!m || m.state === 'absent') return no(`the active machine ${active} does not exist on the host`);
  if (m.state !== 'running') return no(`the active machine ${active} is not running`);
  if (m.kubelet !== 'active') return no(`kubelet in the active machine ${active} is ${m.kubelet}`);
  if (!m.healthy)
    return no(`kubelet in the active machine ${active} is active but its health endpoint does not answer ok`);
  return { serving: true, servingReason: null };
}
