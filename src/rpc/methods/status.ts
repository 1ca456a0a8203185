import { z } from 'zod';
import { defineMethod } from '../method.js';
import { nodeStatusSchema, operationSchema } from '../schemas.js';

export const statusResult = z
  .object({
    daemon: z.object({
      version: z.string(),
      pid: z.number().int(),
      startedAt: z.string(),
      state: z.enum(['starting', 'recovering', 'ready', 'draining']),
    }),
    node: nodeStatusSchema,
    operation: operationSchema.nullable().meta({ description: 'The running operation, if any.' }),
    lastOperation: operationSchema.nullable().meta({ description: 'The most recent finished operation.' }),
    watcher: z
      .object({
        enabled: z.boolean(),
        connected: z.boolean(),
        machineName: z.string().nullable(),
        lastEventAt: z.string().nullable(),
        lastReconcileAt: z.string().nullable(),
        lastError: z.string().nullable(),
      })
      .nullable()
      .meta({ description: 'The Machine CR watcher; null when it does not run.' }),
  })
  .meta({ id: 'Status' });

export const status = defineMethod({
  name: 'status',
  summary: 'Daemon, node, machines, and the current and last operation.',
  description:
    'Cheap and safe to poll: node facts come from a snapshot refreshed in the background and after every operation.',
  mutating: false,
  errors: [],
  params: z.strictObject({}),
  result: statusResult,
  handler: async (_params, { services }) => {
    const engine = services.engine.status();
    return {
      daemon: services.daemonInfo(),
      node: engine.node,
      operation: engine.operation,
      lastOperation: engine.lastOperation,
      watcher: services.watcherStatus(),
    };
  },
});
