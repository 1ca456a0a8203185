import * as z from 'zod';
import { warningMessages } from '../../engine/warnings.js';
import { defineMethod } from '../method.js';
import { nodeStatusSchema, operationSchema } from '../schemas.js';

export const statusResult = z
  .object({
    daemon: z.object({
      version: z.string(),
      pid: z.number().int(),
      startedAt: z.string(),
      state: z.enum(['starting', 'recovering', 'ready', 'draining']),
      host: z.enum(['systemd', 'sim']).optional().meta({
        description: 'How host commands run (--host): agentctl uninstall acts on this host only.',
      }),
      root: z.string().optional().meta({ description: 'The --root every host path is under.' }),
      shutdownGraceMs: z.number().int().optional().meta({
        description: 'The --shutdown-grace: agentctl stop waits at least this long for an operation.',
      }),
      pidFile: z.string().optional().meta({
        description: 'The --pid-file: agentctl stop and uninstall check that it names this daemon.',
      }),
      stateDir: z.string().optional().meta({
        description:
          "The --state-dir: agentctl uninstall removes this directory (when it carries agentd's marker).",
      }),
    }),
    node: nodeStatusSchema,
    operation: operationSchema.nullable().meta({ description: 'The running operation, if any.' }),
    lastOperation: operationSchema.nullable().meta({ description: 'The most recent finished operation.' }),
    watcher: z
      .object({
        enabled: z.boolean().meta({ description: 'The watcher runs.' }),
        reason: z.string().nullable().meta({ description: 'Why the watcher does not run, else null.' }),
        connected: z.boolean().meta({ description: 'The Machine watch stream is open.' }),
        machineName: z.string().nullable(),
        lastEventAt: z.string().nullable(),
        lastReconcileAt: z.string().nullable(),
        lastError: z.string().nullable().meta({
          description: 'The most recent watch, registration or reconcile error; cleared by the next success.',
        }),
        lastErrorCode: z.string().nullable().meta({ description: 'Stable code of lastError.' }),
        blocked: z
          .object({
            target: z.record(z.string(), z.unknown()).meta({
              description:
                'What the Machine spec asked for: kubernetesVersion, image, nodeLabels, registerWithTaints.',
            }),
            repaveCounter: z
              .number()
              .int()
              .meta({ description: 'spec.operations.repaveCounter when it was asked for.' }),
            operationId: z
              .string()
              .nullable()
              .meta({ description: 'The update that rolled back or failed.' }),
            outcome: z.enum(['rolled_back', 'failed']),
            code: z.string().meta({ description: "The update's error code (e.g. HEALTH_GATE_FAILED)." }),
            reason: z
              .string()
              .meta({ description: "Why the watcher does not apply it, then the update's error message." }),
            since: z.string(),
          })
          .nullable()
          .meta({
            description:
              'A target that rolled back or failed here: not applied again until the Machine asks anew (a new repaveCounter or a different target). See docs/watcher.md.',
          }),
      })
      .nullable()
      .meta({ description: 'The Machine CR watcher (see docs/watcher.md); null without Kubernetes wiring.' }),
  })
  .meta({ id: 'Status' });

export const status = defineMethod({
  name: 'status',
  summary: 'Daemon, node, machines, and the current and last operation.',
  description:
    'Safe to poll: the node facts are at most 1 s old (node.observedAt), read again before the answer when older, except while an operation runs; they are read again before an operation is reported ended, so the status right after an operation shows its effect. The answer is serialized once per change of anything it shows (docs/architecture.md, the status path).',
  mutating: false,
  errors: [],
  params: z.strictObject({}),
  result: statusResult,
  // Polled by scripts and monitoring: the answer is serialized once per change of any input.
  version: (services) => services.statusVersion.value,
  handler: async (_params, { services }) => {
    const read = await services.status.status();
    const { warnings, ...node } = read.node;
    return {
      daemon: services.daemonInfo(),
      // The text stays in `warnings`, as before; `warningDetails` carries the typed values.
      node: { ...node, warnings: warningMessages(warnings), warningDetails: warnings },
      operation: read.operation,
      lastOperation: read.lastOperation,
      watcher: services.watcherStatus(),
    };
  },
});
