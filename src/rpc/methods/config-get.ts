import * as z from 'zod';
import { AgentError } from '../../errors.js';
import { defineMethod } from '../method.js';
import { machineNameSchema } from '../schemas.js';

export const configGet = defineMethod({
  name: 'config.get',
  summary: 'The applied config of the active machine, secrets redacted.',
  description:
    "Returns the agent config (PascalCase, as in the applied-config file) with its secrets redacted: the bootstrap token and the exec credential's args and env values replaced by [REDACTED], credentials in URLs (http://user:pass@…) by ***. NOT_FOUND on a node that has not joined.",
  mutating: false,
  errors: ['NOT_FOUND', 'CHECKSUM_MISMATCH', 'INVALID_CONFIG'],
  params: z.strictObject({}),
  result: z
    .object({
      machine: machineNameSchema,
      hash: z.string().meta({ description: 'SHA-256 of the applied-config file.' }),
      verified: z.boolean().meta({ description: 'False when the .sha256 sidecar was missing.' }),
      config: z.record(z.string(), z.unknown()).meta({ description: 'The agent config, redacted.' }),
    })
    .meta({ id: 'AppliedConfig' }),
  handler: async (_params, { services }) => {
    const applied = await services.status.appliedConfig();
    if (!applied)
      throw new AgentError(
        'NOT_FOUND',
        'no applied config: the node has not joined yet (agentctl update --config FILE joins it)',
      );
    return applied;
  },
});
