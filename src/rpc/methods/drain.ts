import * as z from 'zod';
import { defineMethod } from '../method.js';
import { operationSchema } from '../schemas.js';

export const drainParams = z.strictObject({
  timeoutSeconds: z.number().positive().max(86_400).default(300).meta({
    description: 'Give up after this long; pods still there are reported and the node stays cordoned.',
  }),
  force: z
    .boolean()
    .default(false)
    .meta({ description: 'Also delete pods no controller manages (they are not recreated).' }),
  ignoreDaemonSets: z
    .boolean()
    .default(false)
    .meta({ description: 'Skip DaemonSet pods instead of refusing the drain.' }),
  deleteEmptyDirData: z
    .boolean()
    .default(false)
    .meta({ description: 'Evict pods with emptyDir volumes (their data is lost).' }),
  dryRun: z
    .boolean()
    .default(false)
    .meta({ description: 'Report what would be evicted, skipped or refused; change nothing.' }),
  wait: z.boolean().default(false).meta({ description: 'Answer only when the drain has ended.' }),
  reason: z.string().max(1024).optional().meta({ description: 'Why (recorded in the operation and logs).' }),
});

export const drain = defineMethod({
  name: 'drain',
  summary: 'Cordon the node and evict its pods through the Eviction API (PodDisruptionBudget-aware).',
  description:
    'Cordons the node (recording in a node annotation that agentd made the cordon), lists its pods, skips mirror pods and, with ignoreDaemonSets, DaemonSet pods, refuses pods without a controller unless force and pods with emptyDir volumes unless deleteEmptyDirData, evicts the rest with bounded concurrency, retries evictions a PodDisruptionBudget refuses (429) until the timeout, and waits for the pods to be gone. The operation result lists evicted, skipped and remaining pods with reasons. A drain that fails leaves the node cordoned until `uncordon`. dryRun records no operation.',
  mutating: true,
  errors: ['BUSY', 'PRECONDITION_FAILED', 'DRAIN_FAILED', 'KUBE_UNAVAILABLE', 'NOT_FOUND'],
  params: drainParams,
  result: operationSchema,
  handler: async (p, { services, caller }) =>
    services.drain.drain({
      timeoutSeconds: p.timeoutSeconds,
      force: p.force,
      ignoreDaemonSets: p.ignoreDaemonSets,
      deleteEmptyDirData: p.deleteEmptyDirData,
      dryRun: p.dryRun,
      wait: p.wait,
      reason: p.reason,
      requestedBy: caller,
    }),
});
