/**
 * The one place errors become JSON-RPC errors. Handlers only throw; an AgentError keeps its
 * numeric code, message and data (with the stable string code in `data.code`); anything else
 * is an internal error whose details go to the log, not the wire.
 */
import { ERROR_CODES, isAgentError, type ErrorCode } from '../errors.js';

/** A JSON-RPC 2.0 error object as agentd sends it: the string code always in `data.code`. */
export interface WireError {
  code: number;
  message: string;
  data: { code: ErrorCode | string } & Record<string, unknown>;
}

export function makeWireError(
  code: ErrorCode,
  message: string,
  data: Record<string, unknown> = {},
): WireError {
  return { code: ERROR_CODES[code].rpc, message, data: { ...data, code } };
}

/** Map any thrown value to a wire error; `internal` is true when it was not an expected error. */
export function toWireError(err: unknown): { error: WireError; internal: boolean } {
  if (isAgentError(err)) return { error: makeWireError(err.code, err.message, err.data), internal: false };
  return { error: makeWireError('INTERNAL', 'internal error; see the agentd log'), internal: true };
}
