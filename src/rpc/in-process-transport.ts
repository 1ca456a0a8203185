/**
 * A JSON-RPC transport that hands requests straight to the daemon's dispatcher: the watcher's
 * way into the API. It goes through exactly what a socket call goes through (params validation,
 * the draining/readiness gate, BUSY, idempotency, metrics, one log line), minus HTTP.
 */
import type { RpcTransport } from './client.js';
import type { Dispatcher } from './dispatcher.js';

/**
 * A transport calling `dispatcher.handle(request, caller)`. Requests and responses are copied
 * through JSON, so the caller and the engine never share objects, as over the wire.
 */
export function createInProcessTransport(
  dispatcher: Pick<Dispatcher, 'handle'>,
  caller = 'watcher',
): RpcTransport {
  return async (request) => {
    const response = await dispatcher.handle(JSON.parse(JSON.stringify(request)) as unknown, caller);
    return response === null ? null : (JSON.parse(JSON.stringify(response)) as unknown);
  };
}
