/** operations.get / list / wait / cancel: the operation history and the running operation. */
import * as z from 'zod';
import { OPERATION_STATES } from '../../engine/operation.js';
import { defineMethod } from '../method.js';
import { operationSchema } from '../schemas.js';

const id = z.string().min(1).meta({ description: 'Operation id.' });

export const operationsGet = defineMethod({
  name: 'operations.get',
  summary: 'One operation by id.',
  description: 'The running operation or one from the history under --state-dir.',
  mutating: false,
  errors: ['NOT_FOUND'],
  params: z.strictObject({ id }),
  result: operationSchema,
  handler: async (p, { services }) => services.operations.getOperation(p.id),
});

export const operationsList = defineMethod({
  name: 'operations.list',
  summary: 'Operations, newest first.',
  description: 'The history is bounded (the newest 200 are kept).',
  mutating: false,
  errors: [],
  params: z.strictObject({
    limit: z.number().int().min(1).max(1000).default(20),
    state: z.enum(OPERATION_STATES).optional(),
  }),
  result: z.object({ operations: z.array(operationSchema) }).meta({ id: 'OperationList' }),
  handler: async (p, { services }) => ({
    operations: services.operations.listOperations({ limit: p.limit, state: p.state }),
  }),
});

export const operationsWait = defineMethod({
  name: 'operations.wait',
  summary: 'The operation once it ends, or as it is when the timeout passes.',
  description: 'Without timeoutSeconds it waits until the operation ends.',
  mutating: false,
  errors: ['NOT_FOUND'],
  params: z.strictObject({ id, timeoutSeconds: z.number().positive().max(86_400).optional() }),
  result: operationSchema,
  handler: async (p, { services }) =>
    services.operations.waitOperation(
      p.id,
      p.timeoutSeconds === undefined ? undefined : p.timeoutSeconds * 1000,
    ),
});

export const operationsCancel = defineMethod({
  name: 'operations.cancel',
  summary: 'Cancel a running operation; refused once the switch-over has begun.',
  description:
    'Before the source machine stops, cancelling undoes what was done (the target is removed) and the operation ends cancelled. After that, PRECONDITION_FAILED; a reset or an uncordon runs to its end and is never cancellable.',
  mutating: true,
  errors: ['NOT_FOUND', 'PRECONDITION_FAILED'],
  params: z.strictObject({ id }),
  result: operationSchema,
  handler: async (p, { services }) => services.operations.cancelOperation(p.id),
});
