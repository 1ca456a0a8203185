/** Operations and events for the follow tests. */
import type { Operation, Phase, StreamEvent } from '../../../../src/cli/types.js';

export const T0 = Date.parse('2026-03-01T12:00:00.000Z');
export const iso = (ms: number): string => new Date(T0 + ms).toISOString();

export function phase(name: string, state: Phase['state'] = 'pending', o: Partial<Phase> = {}): Phase {
  return { name, state, startedAt: null, finishedAt: null, error: null, ...o };
}

export function makeOperation(o: Partial<Operation> = {}): Operation {
  return {
    id: 'op-1',
    kind: 'update',
    state: 'running',
    reason: null,
    requestedBy: 'agentctl',
    idempotencyKey: null,
    createdAt: iso(0),
    startedAt: iso(0),
    finishedAt: null,
    from: 'kube1',
    to: 'kube2',
    phases: [phase('preflight'), phase('provision'), phase('verify')],
    result: null,
    error: null,
    ...o,
  };
}

export const phaseEvent = (
  name: string,
  state: Phase['state'],
  atMs: number,
  error?: string,
): StreamEvent => ({
  type: 'phase',
  operationId: 'op-1',
  phase: name,
  state,
  at: iso(atMs),
  ...(error ? { error } : {}),
});

export const progressEvent = (
  task: string,
  atMs: number,
  o: { bytes?: number; totalBytes?: number; message?: string } = {},
): StreamEvent => ({ type: 'progress', operationId: 'op-1', phase: 'provision', task, at: iso(atMs), ...o });
