/**
 * The typed JSON-RPC client used by agentctl (over the unix socket) and by the watcher (in
 * process). Types come from the method table with `import type`, so loading the client loads
 * no schema code.
 */
import type { MethodName, MethodTypes } from './methods/index.js';

export interface RpcErrorBody {
  code: number;
  message: string;
  data?: { code?: string } & Record<string, unknown>;
}

/** A JSON-RPC error answered by the daemon; `appCode` is the stable string code. */
export class RpcError extends Error {
  readonly rpcCode: number;
  readonly appCode: string;
  readonly data: Record<string, unknown>;

  constructor(body: RpcErrorBody) {
    super(body.message);
    this.name = 'RpcError';
    this.rpcCode = body.code;
    this.data = body.data ?? {};
    this.appCode = typeof body.data?.code === 'string' ? body.data.code : String(body.code);
  }
}

/**
 * The daemon's answer is not one agentctl can read: not HTTP, cut short, not JSON, or not a
 * JSON-RPC response. A bug, or a daemon that died while answering, or something else on the socket.
 */
export class BadAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadAnswerError';
  }
}

/** A JSON-RPC error object as the spec has it: a numeric code and a message. */
function isErrorBody(value: unknown): value is RpcErrorBody {
  if (typeof value !== 'object' || value === null) return false;
  const e = value as { code?: unknown; message?: unknown; data?: unknown };
  return (
    typeof e.code === 'number' &&
    typeof e.message === 'string' &&
    (e.data === undefined || (typeof e.data === 'object' && e.data !== null))
  );
}

/** Carries one JSON-RPC request object and returns the parsed response object. */
export type RpcTransport = (request: Record<string, unknown>) => Promise<unknown>;

export interface RpcClient {
  call<M extends MethodName>(method: M, params?: MethodTypes[M]['params']): Promise<MethodTypes[M]['result']>;
  /** Untyped call for `agentctl rpc METHOD PARAMS`. */
  callRaw(method: string, params?: unknown): Promise<unknown>;
}

export function createRpcClient(transport: RpcTransport): RpcClient {
  let nextId = 1;
  const callRaw = async (method: string, params?: unknown): Promise<unknown> => {
    const id = nextId++;
    const response = (await transport({ jsonrpc: '2.0', id, method, params: params ?? {} })) as {
      result?: unknown;
      error?: unknown;
    } | null;
    if (response === null || typeof response !== 'object' || Array.isArray(response))
      throw new BadAnswerError(`the daemon sent no JSON-RPC response to ${method}`);
    if ('error' in response) {
      if (!isErrorBody(response.error))
        throw new BadAnswerError(`the daemon answered ${method} with a malformed JSON-RPC error`);
      throw new RpcError(response.error);
    }
    if (!('result' in response))
      throw new BadAnswerError(`the daemon answered ${method} with neither a result nor an error`);
    return response.result;
  };
  return {
    callRaw,
    call: async (method, params) => (await callRaw(method, params)) as never,
  };
}
