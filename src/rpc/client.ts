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
      error?: RpcErrorBody;
    } | null;
    if (response === null || typeof response !== 'object')
      throw new Error('the daemon sent no JSON-RPC response');
    if (response.error) throw new RpcError(response.error);
    return response.result;
  };
  return {
    callRaw,
    call: async (method, params) => (await callRaw(method, params)) as never,
  };
}
