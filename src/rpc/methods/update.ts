import * as z from 'zod';
import {
  agentConfigSchema,
  imageReferenceSchema,
  nodeLabelsSchema,
  taintSchema,
  versionSchema,
} from '../../config/agent-config.js';
import { defineMethod } from '../method.js';
import { operationSchema } from '../schemas.js';

/** The fields of the applied config an update (or a preflight) may change without a whole config. */
export const goalSetSchema = z
  .strictObject({
    kubernetesVersion: versionSchema.optional(),
    image: imageReferenceSchema.optional().meta({ description: 'OCI rootfs image reference.' }),
    nodeLabels: nodeLabelsSchema.optional().meta({
      description:
        'The labels the kubelet registers the node with (replaces them all): keys and values in Kubernetes label syntax.',
    }),
    registerWithTaints: z.array(taintSchema).optional().meta({
      description:
        'The taints the kubelet registers the node with (replaces them all): key[=value]:Effect, Effect one of NoSchedule, PreferNoSchedule, NoExecute.',
    }),
  })
  .meta({ description: 'Change these fields of the applied config (what the Machine CR carries).' });

export const updateParams = z
  .strictObject({
    config: agentConfigSchema.optional().meta({
      description:
        'A full agent config (PascalCase, as in the applied-config file). Replaces the applied one.',
    }),
    set: goalSetSchema.optional(),
    force: z
      .boolean()
      .default(false)
      .meta({ description: 'Provision a fresh machine even when nothing changed (repave).' }),
    drain: z
      .boolean()
      .default(false)
      .meta({ description: 'Cordon and drain the node before the switch-over; uncordon after.' }),
    ignoreFleet: z.boolean().default(false).meta({
      description:
        'Do not pass the fleet gate (no slot, window, pause or halt check: the slot phase is skipped; docs/fleet.md).',
    }),
    dryRun: z.boolean().default(false).meta({ description: 'Return the plan; change nothing.' }),
    wait: z.boolean().default(false).meta({
      description:
        'Answer only when the operation has ended (without it: once it has started, its journal on disk).',
    }),
    idempotencyKey: z.string().min(1).max(256).optional().meta({
      description:
        'An update with a key seen before returns that operation instead of starting a new one. Not with dryRun: a dry run records no operation to return.',
    }),
    reason: z
      .string()
      .max(1024)
      .optional()
      .meta({ description: 'Why (recorded in the operation and logs).' }),
  })
  .refine((p) => !(p.config && p.set), { message: 'pass either config or set, not both', path: ['set'] })
  // A dry run records no operation (docs/api.md, "Dry runs"): a retry with the same key would not
  // find it, so a key there would promise what it cannot keep.
  .refine((p) => !(p.dryRun && p.idempotencyKey !== undefined), {
    message:
      'not allowed with dryRun: true (a dry run records no operation for the key to return); drop idempotencyKey or dryRun',
    path: ['idempotencyKey'],
  });

export const update = defineMethod({
  name: 'update',
  summary: 'Bring the node to a config: join kube1 on a fresh node, or switch to the alternate machine.',
  description:
    'Provisions and stages the alternate machine beside the serving one, then stops the source, starts and verifies the target, commits and cleans up (docs/architecture.md). Failure before stop removes the target; failure in start or verify rolls back. An update whose target equals the applied config succeeds at once with result.changed=false unless force.',
  mutating: true,
  errors: ['BUSY', 'PRECONDITION_FAILED', 'INVALID_CONFIG', 'NOT_FOUND'],
  params: updateParams,
  result: operationSchema,
  handler: async (p, { services, caller }) =>
    services.operations.update({
      config: p.config,
      set: p.set,
      force: p.force,
      drain: p.drain,
      ignoreFleet: p.ignoreFleet,
      dryRun: p.dryRun,
      wait: p.wait,
      idempotencyKey: p.idempotencyKey,
      reason: p.reason,
      requestedBy: caller,
    }),
});
