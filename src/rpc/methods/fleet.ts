/**
 * fleet.status / fleet.pause / fleet.resume (docs/fleet.md, "Operating the fleet"): the fleet as
 * this node sees it in the Kubernetes API, and pause and resume with this agentd's credentials.
 * They act on the whole fleet (the policy ConfigMap and the recorded failures), not on this node;
 * with deploy/'s RBAC a node may not, and `agentctl fleet pause|resume` make the change with the
 * operator's kubeconfig instead (src/fleet/operator.ts).
 */
import * as z from 'zod';
import { PreconditionFailedError } from '../../errors.js';
import { defineMethod } from '../method.js';
import { fleetStatusSchema } from '../fleet-schemas.js';
import type { FleetService, RpcServices } from '../services.js';

function fleetOf(services: RpcServices): FleetService {
  const f = services.fleet?.() ?? { unavailable: 'no Kubernetes wiring' };
  if ('unavailable' in f) {
    throw new PreconditionFailedError(`the fleet gate needs the Kubernetes API: ${f.unavailable}`);
  }
  return f;
}

export const fleetStatus = defineMethod({
  name: 'fleet.status',
  summary: 'The fleet gate: policy, slots and holders, windows, pause, halt and recorded failures.',
  description:
    'Read from the Kubernetes API (namespace agentd-system): the policy as this agent holds it, the slot Leases with their holders and expiry, and the failures recorded in agentd-fleet-state.',
  mutating: false,
  errors: ['PRECONDITION_FAILED', 'KUBE_UNAVAILABLE'],
  params: z.strictObject({}),
  result: fleetStatusSchema,
  handler: async (_p, { services }) => fleetOf(services).status(),
});

export const fleetPause = defineMethod({
  name: 'fleet.pause',
  summary: 'Pause the rollout of the whole fleet: running updates finish, no new one takes a slot.',
  description:
    "Sets paused: true in the policy.yaml of ConfigMap agentd-fleet (creating it with only that when there is none), keeping its other keys and comments, with this agentd's own Kubernetes credentials. Under deploy/'s RBAC a node's credentials may not: PRECONDITION_FAILED with data.reason OperatorRight. Operators run agentctl fleet pause, which makes the same change with their own kubeconfig and does not call this method (docs/fleet.md).",
  mutating: true,
  errors: ['PRECONDITION_FAILED', 'KUBE_UNAVAILABLE', 'KUBE_CONFLICT', 'INVALID_CONFIG'],
  params: z.strictObject({}),
  result: fleetStatusSchema,
  handler: async (_p, { services }) => fleetOf(services).pause(),
});

export const fleetResume = defineMethod({
  name: 'fleet.resume',
  summary: 'Resume the rollout: clear the recorded failures (ending a halt) and set paused: false.',
  description:
    "Empties the failures of ConfigMap agentd-fleet-state, then sets paused: false in the policy (when there is one), with this agentd's own credentials, as fleet.pause: a node's are refused (OperatorRight); operators run agentctl fleet resume with their kubeconfig.",
  mutating: true,
  errors: ['PRECONDITION_FAILED', 'KUBE_UNAVAILABLE', 'KUBE_CONFLICT', 'INVALID_CONFIG'],
  params: z.strictObject({}),
  result: z
    .object({
      status: fleetStatusSchema,
      clearedFailures: z.number().int().meta({ description: 'How many recorded failures were cleared.' }),
    })
    .meta({ id: 'FleetResumeResult' }),
  handler: async (_p, { services }) => fleetOf(services).resume(),
});
