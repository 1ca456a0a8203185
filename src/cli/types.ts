/** Wire types the CLI renders, taken from the method table (types only: nothing is loaded). */
import type { MethodTypes } from '../rpc/methods/index.js';

/** An operation as the daemon reports it (docs/api.md). */
export type Operation = MethodTypes['operations.get']['result'];
export type OperationState = Operation['state'];
export type Phase = Operation['phases'][number];

/** Operation states after which nothing changes any more. */
export const FINAL_STATES: ReadonlySet<string> = new Set([
  'succeeded',
  'failed',
  'rolled_back',
  'cancelled',
  'interrupted',
]);

export function isFinal(op: { state: string }): boolean {
  return FINAL_STATES.has(op.state);
}

/** An event of `GET /v1/events`, as sent. */
export type { StreamEvent } from '../rpc/events.js';
