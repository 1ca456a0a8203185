/**
 * The fleet gate (docs/fleet.md): the policy watch, the Lease slots, the recorded failures and
 * the operator's view, built together for one set of Kubernetes clients and one node.
 */
import type { Logger } from 'pino';
import type { Clock } from '../host/types.js';
import { createFleetObjects, type KubeClients } from '../kube/index.js';
import type { Metrics } from '../metrics/metrics.js';
import { createFleetControl, type FleetControl } from './fleet-control.js';
import { createFleetState } from './fleet-state.js';
import { createLeaseGate, type LeaseGate, type LeaseGateOptions } from './lease-gate.js';
import { createPolicyWatch, type PolicyWatch } from './policy-watch.js';

export type { FleetPolicy } from './policy.js';
export type { FleetStatus, FleetControl, FleetView } from './fleet-control.js';
export type { FleetPolicySource } from './policy-watch.js';

export interface FleetRuntime {
  gate: LeaseGate;
  policy: PolicyWatch;
  control: FleetControl;
  /** Start watching the policy. */
  start(): void;
  /** Stop the watch and the renewals (held slots then expire by themselves). */
  stop(): Promise<void>;
}

export interface FleetRuntimeOptions {
  clients: Pick<KubeClients, 'kc' | 'core' | 'coordination'>;
  namespace: string;
  node: string;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  onChange?: () => void;
  /** Lease, re-check and wake timing (tests, the fleet simulation). */
  timing?: Pick<
    LeaseGateOptions,
    'leaseDurationSeconds' | 'renewIntervalMs' | 'recheckIntervalMs' | 'wakeJitterMs' | 'random'
  >;
}

export function createFleetRuntime(o: FleetRuntimeOptions): FleetRuntime {
  const objects = createFleetObjects({ ...o.clients, namespace: o.namespace });
  const policy = createPolicyWatch({
    objects,
    clock: o.clock,
    logger: o.logger,
    metrics: o.metrics,
    onChange: o.onChange,
  });
  const state = createFleetState({ objects, clock: o.clock });
  const gate = createLeaseGate({
    ...o.timing,
    objects,
    policy,
    state,
    node: o.node,
    clock: o.clock,
    logger: o.logger,
    metrics: o.metrics,
  });
  const control = createFleetControl({
    objects,
    policyState: () => policy.state(),
    state,
    slots: () => gate.slots(),
    about: { node: o.node },
    clock: o.clock,
  });
  return {
    gate,
    policy,
    control,
    start: () => policy.start(),
    async stop() {
      gate.stop();
      await policy.stop();
    },
  };
}
