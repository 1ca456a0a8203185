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

/** Decide whether the node serves, and say why not. */
export function assessServing(
  active: MachineName | null,
  machines: readonly MachineHealth[],
  options: { recovering?: boolean } = {},
): NodeServing {
  const no = (servingReason: string): NodeServing => ({ serving: false, servingReason });
  if (options.recovering) return no('agentd is recovering the node after a restart; try again shortly');
  if (active === null) return no('the node has not joined: no machine is active');
  const m = machines.find((x) => x.name === active);
  if (!m || m.state === 'absent') return no(`the active machine ${active} does not exist on the host`);
  if (m.state !== 'running') return no(`the active machine ${active} is not running`);
  if (m.kubelet !== 'active') return no(`kubelet in the active machine ${active} is ${m.kubelet}`);
  if (!m.healthy)
    return no(`kubelet in the active machine ${active} is active but its health endpoint does not answer ok`);
  return { serving: true, servingReason: null };
}
