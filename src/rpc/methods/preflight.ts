import * as z from 'zod';
import { agentConfigSchema } from '../../config/agent-config.js';
import { defineMethod } from '../method.js';
import { goalSetSchema } from './update.js';

export const preflight = defineMethod({
  name: 'preflight',
  summary: 'Run the preflight checks of an update without changing anything.',
  description:
    'Checks the config, that every artifact and the OCI manifest are reachable (HEAD / manifest GET, no download), disk space and host paths. Without config: the config an update with no params would apply, changed by set (as update takes it).',
  mutating: false,
  errors: ['PRECONDITION_FAILED'],
  params: z.strictObject({
    config: agentConfigSchema.optional(),
    set: goalSetSchema.optional(),
  }),
  result: z
    .object({
      ok: z.boolean(),
      config: z
        .record(z.string(), z.unknown())
        .meta({ description: 'The checked config, secrets redacted.' }),
      checks: z.array(z.object({ name: z.string(), ok: z.boolean(), message: z.string() })),
    })
    .meta({ id: 'PreflightResult' }),
  handler: async (p, { services }) => {
    const r = await services.operations.preflight(p.config, AbortSignal.timeout(60_000), p.set);
    return { ok: r.checks.every((c) => c.ok), config: r.config, checks: r.checks };
  },
});
