/**
 * Wire schemas shared by several methods (operation, node status). They document the engine's
 * types for the OpenRPC document and for the typed client.
 */
import * as z from 'zod';
import { OPERATION_KINDS, OPERATION_STATES, PHASE_STATES, WAIT_REASONS } from '../engine/operation.js';
import { WARNING_CODES } from '../engine/warnings.js';
import { MACHINE_NAMES } from '../host/types.js';

export const machineNameSchema = z.enum(MACHINE_NAMES).meta({ description: 'A machine slot.' });

export const errorInfoSchema = z
  .object({
    code: z.string().meta({ description: 'Stable error code (see docs/errors.md).' }),
    message: z.string(),
    data: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: 'ErrorInfo', description: 'An error recorded in an operation or phase.' });

export const phaseSchema = z
  .object({
    name: z.string(),
    state: z.enum(PHASE_STATES),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
    error: errorInfoSchema.nullable(),
  })
  .meta({ id: 'Phase', description: 'One phase of an operation.' });

export const operationSchema = z
  .object({
    id: z.string(),
    kind: z.enum(OPERATION_KINDS),
    state: z.enum(OPERATION_STATES),
    reason: z.string().nullable(),
    requestedBy: z.string(),
    idempotencyKey: z.string().nullable(),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
    from: machineNameSchema.nullable(),
    to: machineNameSchema.nullable(),
    phases: z.array(phaseSchema),
    result: z.record(z.string(), z.unknown()).nullable(),
    error: errorInfoSchema.nullable(),
    wait: z
      .object({
        reason: z.enum(WAIT_REASONS).meta({
          description:
            'WaitingForSlot (all fleet slots held), OutsideWindow (no maintenance window open), Paused (the fleet policy is paused), Halted (recorded failures reached maxFailures).',
        }),
        message: z.string(),
        since: z.string().meta({ description: 'When the operation began to wait for this reason.' }),
      })
      .optional()
      .meta({
        description:
          'Present only while the operation waits: in the slot phase, for the fleet gate (docs/fleet.md).',
      }),
  })
  .meta({
    id: 'Operation',
    description: 'A mutating operation (update, reset, drain, uncordon) and its progress.',
  });

/** One warning of `status`, typed (src/engine/warnings.ts; docs/api.md, "Status warnings"). */
export const statusWarningSchema = z
  .object({
    code: z
      .enum(WARNING_CODES)
      .meta({ description: 'Stable code of the warning (docs/api.md, "Status warnings").' }),
    message: z.string().meta({ description: 'The warning as node.warnings shows it.' }),
    machine: machineNameSchema.nullable().optional().meta({
      description:
        'The machine it is about; for state-conflict, the machine the host says serves (null: none).',
    }),
    file: z.string().optional().meta({
      description:
        'The file it is about: for state-conflict, the state file that disagrees (node.json, journal.json).',
    }),
    against: z.enum(['host', 'node.json', 'applied-config']).optional().meta({
      description:
        "state-conflict: what the file disagrees with — the host's machines, node.json, or the applied configs.",
    }),
    action: z
      .string()
      .optional()
      .meta({ description: 'state-conflict: what agentd did, or does, about it.' }),
    operationId: z.string().nullable().optional().meta({ description: 'The operation it is about.' }),
    write: z.string().optional().meta({
      description: 'deferred-writes: the write owed (journal, node-state, operation:<id>).',
    }),
    since: z.string().optional().meta({ description: 'deferred-writes: since when it is owed.' }),
  })
  .meta({ id: 'StatusWarning' });

export const nodeStatusSchema = z
  .object({
    activeMachine: machineNameSchema.nullable(),
    serving: z.boolean().meta({
      description:
        'The node serves: the active machine runs and its kubelet is active and healthy. About the node, not agentd (see /readyz).',
    }),
    servingReason: z
      .string()
      .nullable()
      .meta({ description: 'Why the node does not serve; null while it serves.' }),
    applied: z
      .object({ kubernetesVersion: z.string(), image: z.string(), hash: z.string() })
      .nullable()
      .meta({ description: 'Summary of the active machine applied config; null on a node not joined yet.' }),
    machines: z.array(
      z.object({
        name: machineNameSchema,
        state: z.enum(['running', 'stopped', 'absent']),
        kubelet: z.enum(['active', 'inactive', 'failed', 'unknown']),
      }),
    ),
    cordoned: z.boolean().nullable().meta({
      description:
        'Whether the node is cordoned, as its Node object says (followed by a watch); null when unknown (no Kubernetes, no such Node, the watch down).',
    }),
    warnings: z
      .array(z.string())
      .meta({ description: 'What agentd warns about, as text (the messages of warningDetails).' }),
    warningDetails: z.array(statusWarningSchema).meta({
      description: 'The same warnings, in the same order, as typed values: decide by code, not by text.',
    }),
    repair: z
      .object({
        state: z.enum(['off', 'idle', 'repairing', 'backoff', 'gave_up']).meta({
          description:
            'off (--no-repair), idle, repairing, backoff (waiting to retry a failed repair), gave_up (after repeated failures).',
        }),
        failures: z.number().int().meta({ description: 'Failed repairs in a row.' }),
        nextAttemptAt: z
          .string()
          .nullable()
          .meta({ description: 'When the next repair may run, in backoff.' }),
        lastError: z.string().nullable().meta({ description: 'The error of the last failed repair.' }),
        lastOperation: z.string().nullable().meta({ description: 'The id of the last repair operation.' }),
      })
      .nullable()
      .meta({ description: 'Repair between requests (see docs/operations.md); null when not available.' }),
    observedAt: z.string().nullable().meta({
      description:
        'When the read of the node these facts come from started; null before the first read. At most 1 s old while no operation runs (see docs/architecture.md, the status path).',
    }),
  })
  .meta({ id: 'NodeStatus' });
