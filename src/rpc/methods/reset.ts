import * as z from 'zod';
import { defineMethod } from '../method.js';
import { operationSchema } from '../schemas.js';

export const reset = defineMethod({
  name: 'reset',
  summary: "Tear the node's machines down: stop and remove both, their nspawn files and applied configs.",
  description: 'Journaled: a reset interrupted by a crash is finished by startup recovery.',
  mutating: true,
  errors: ['BUSY', 'COMMAND_FAILED'],
  params: z.strictObject({
    wait: z.boolean().default(false).meta({ description: 'Answer only when the reset has ended.' }),
    reason: z.string().max(1024).optional(),
  }),
  result: operationSchema,
  handler: async (p, { services, caller }) =>
    services.operations.reset({ wait: p.wait, reason: p.reason, requestedBy: caller }),
});
