/**
 * Pre-serialized JSON inside a JSON-RPC response. Read methods that declare a cache key have
 * their result serialized once per change; responses splice the bytes in instead of
 * stringifying the same object on every poll.
 */
import type { JSONRPCResponse } from 'json-rpc-2.0';

export class RawJson {
  constructor(readonly json: string) {}

  toJSON(): unknown {
    // Only reached when something stringifies a response generically (tests, in-process callers).
    return JSON.parse(this.json) as unknown;
  }
}

function serializeOne(r: JSONRPCResponse): string {
  if ('result' in r && r.result instanceof RawJson) {
    return `{"jsonrpc":"2.0","id":${JSON.stringify(r.id)},"result":${r.result.json}}`;
  }
  return JSON.stringify(r);
}

/** The wire bytes of a response or batch of responses. */
export function serializeResponse(response: JSONRPCResponse | JSONRPCResponse[]): string {
  return Array.isArray(response) ? `[${response.map(serializeOne).join(',')}]` : serializeOne(response);
}

/** A response as plain data (RawJson results parsed), for in-process callers. */
export function materializeResponse(response: JSONRPCResponse | JSONRPCResponse[] | null): unknown {
  return response === null ? null : (JSON.parse(serializeResponse(response)) as unknown);
}
