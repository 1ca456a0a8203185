/**
 * The one place errors become JSON-RPC errors. Handlers only throw; an AgentError keeps its
 * numeric code, message and data (with the stable string code in `data.code`); anything else
 * is an internal error whose details go to the log, not the wire.
 */
import { JSONRPCErrorException, type JSONRPCError } from 'json-rpc-2.0';
import { ERROR_CODES, isAgentError, type ErrorCode } from '../errors.js';

export interface WireError extends JSONRPCError {
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
  if (err instanceof JSONRPCErrorException) {
    const data = (err.data ?? {}) as Record<string, unknown>;
    return {
      error: { code: err.code, message: err.message, data: { code: 'INTERNAL', ...data } },
      internal: false,
    };
  }
  return { error: makeWireError('INTERNAL', 'internal error; see the agentd log'), internal: true };
}

/** The string code of a wire error (for metrics labels). */
export function wireCodeOf(error: JSONRPCError): string {
  const data = error.data as { code?: unknown } | undefined;
  if (data && typeof data.code === 'string') return data.code;
  const found = (Object.keys(ERROR_CODES) as ErrorCode[]).find((k) => ERROR_CODES[k].rpc === error.code);
  return found ?? String(error.code);
}
