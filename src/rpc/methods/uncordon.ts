import * as z from 'zod';
import { defineMethod } from '../method.js';
import { operationSchema } from '../schemas.js';

export const uncordonParams = z.strictObject({
  force: z.boolean().default(false).meta({
    description:
      'Also undo a cordon agentd did not make (an administrator’s). Without it such a cordon stays and the result says cordoned-by-other.',
  }),
  wait: z.boolean().default(false).meta({ description: 'Answer only when the operation has ended.' }),
  reason: z.string().max(1024).optional().meta({ description: 'Why (recorded in the operation and logs).' }),
});

export const uncordon = defineMethod({
  name: 'uncordon',
  summary: 'Make the node schedulable again, undoing only a cordon agentd made.',
  description:
    'Agentd marks the cordons it makes with a node annotation; uncordon undoes only those, so a node an administrator cordoned stays cordoned (result.outcome cordoned-by-other) unless force. result: {uncordoned, outcome: uncordoned | not-cordoned | cordoned-by-other}.',
  mutating: true,
  errors: ['BUSY', 'PRECONDITION_FAILED', 'KUBE_UNAVAILABLE', 'NOT_FOUND'],
  params: uncordonParams,
  result: operationSchema,
  handler: async (p, { services, caller }) =>
    services.drain.uncordon({ force: p.force, wait: p.wait, reason: p.reason, requestedBy: caller }),
});
