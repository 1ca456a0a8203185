import { describe, expect, it } from 'vitest';
import { createRpcClient, RpcError } from '../../../src/rpc/client.js';
import type { Dispatcher } from '../../../src/rpc/dispatcher.js';
import { createInProcessTransport } from '../../../src/rpc/in-process-transport.js';

describe('createInProcessTransport', () => {
  it('hands the request to the dispatcher as the named caller, copying both ways', async () => {
    const seen: Array<{ body: unknown; caller: string }> = [];
    const shared = { nested: { value: 1 } };
    const dispatcher: Pick<Dispatcher, 'handle'> = {
      handle: async (body, caller) => {
        seen.push({ body, caller });
        return { jsonrpc: '2.0', id: (body as { id: number }).id, result: shared };
      },
    };
    const params = { set: { kubernetesVersion: '1.35.0' } };
    const client = createRpcClient(createInProcessTransport(dispatcher));
    const result = (await client.callRaw('update', params)) as typeof shared;
    expect(seen).toEqual([{ body: { jsonrpc: '2.0', id: 1, method: 'update', params }, caller: 'watcher' }]);
    expect(seen[0]?.body).not.toBe(params);
    expect(result).toEqual(shared);
    result.nested.value = 2;
    expect(shared.nested.value).toBe(1);
  });

  it('turns an error response into an RpcError with the stable code', async () => {
    const dispatcher: Pick<Dispatcher, 'handle'> = {
      handle: async () => ({
        jsonrpc: '2.0',
        id: 1,
        error: { code: 1001, message: 'busy', data: { code: 'BUSY' } },
      }),
    };
    const err = await createRpcClient(createInProcessTransport(dispatcher, 'bench'))
      .callRaw('update')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcError);
    expect(err).toMatchObject({ appCode: 'BUSY', rpcCode: 1001 });
  });
});
