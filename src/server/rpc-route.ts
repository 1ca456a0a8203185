/**
 * `POST /rpc`, a fastify route like every other: fastify reads the body within its limit
 * (`RPC_BODY_LIMIT`), its content-type parser takes `application/json` and
 * `application/json-rpc`, and its hooks and error handler see every call. Any other HTTP method
 * on `/rpc` is answered 405 with `Allow: POST` before a body is read.
 *
 * Requests refused before they are read as JSON-RPC (405, 413, 415) are handed to the
 * dispatcher to be counted and logged under `(invalid)`, as every refused call is
 * (docs/api.md, "JSON-RPC conventions").
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { Dispatcher } from '../rpc/dispatcher.js';
import { makeWireError, type WireError } from '../rpc/error-map.js';
import { RPC_BODY_LIMIT } from '../rpc/limits.js';

export { RPC_BODY_LIMIT };

/** The media types `/rpc` takes; parameters such as `charset` are allowed, case does not matter. */
export const RPC_MEDIA_TYPES = ['application/json', 'application/json-rpc'] as const;

export interface RpcRouteOptions {
  dispatcher: Dispatcher;
  logger: Logger;
  /**
   * True when this request may only ask for `status` (it came on a connection admitted from
   * the reserve at the connection limit: connection-guard.ts).
   */
  statusOnly?: (req: FastifyRequest) => boolean;
  /** Answers a request that `statusOnly` turns away. */
  refuseReserved?: (reply: FastifyReply) => FastifyReply;
}

/** Who called, for logs and `requestedBy`: `x-agentd-caller`, else the user agent (docs/api.md). */
export function callerOf(headers: IncomingHttpHeaders): string {
  return String(headers['x-agentd-caller'] ?? headers['user-agent'] ?? 'http').slice(0, 64);
}

/** A JSON-RPC error outside any call, on a connection that is closed after it. */
export function sendWireError(
  reply: FastifyReply,
  status: number,
  error: WireError,
  headers: Record<string, string> = {},
): FastifyReply {
  // A refused body is not read: closing the connection spares reading the rest of it.
  return reply
    .code(status)
    .headers({ ...headers, connection: 'close' })
    .type('application/json; charset=utf-8')
    .send(JSON.stringify({ jsonrpc: '2.0', id: null, error }));
}

/** True for a body that is one call of `status` (what a reserve connection may ask). */
function isStatusCall(text: string): boolean {
  try {
    const body = JSON.parse(text) as unknown;
    return typeof body === 'object' && body !== null && (body as { method?: unknown }).method === 'status';
  } catch {
    return false;
  }
}

/** Register `/rpc` in a scope of its own: its content-type parser and error handler apply only to it. */
export function registerRpcRoute(app: FastifyInstance, o: RpcRouteOptions): void {
  const { dispatcher } = o;

  /** Answer a request refused before it is read as JSON-RPC; counted and logged with the reason. */
  const refuse = (
    req: FastifyRequest,
    reply: FastifyReply,
    status: number,
    code: 'INVALID_REQUEST' | 'PAYLOAD_TOO_LARGE',
    message: string,
    data: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ): FastifyReply => {
    dispatcher.refused(code, `HTTP ${status}: ${message}`, callerOf(req.headers));
    return sendWireError(reply, status, makeWireError(code, message, data), headers);
  };

  /** 415, naming the type received. */
  const refuseMediaType = (req: FastifyRequest, reply: FastifyReply): FastifyReply => {
    // Echoed to the client and the log: a header of any length is cut to a readable size.
    const shown = req.headers['content-type']?.slice(0, 100);
    const got = shown === undefined || shown === '' ? 'none' : JSON.stringify(shown);
    const message = `content-type must be application/json, got ${got}`;
    return refuse(req, reply, 415, 'INVALID_REQUEST', message, { contentType: shown ?? null });
  };

  void app.register((scope, _opts, done) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser([...RPC_MEDIA_TYPES], { parseAs: 'string' }, (_req, body, parsed) =>
      parsed(null, body),
    );

    scope.setErrorHandler((err: FastifyError, req, reply) => {
      if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
        const declared = req.headers['content-length'];
        const size =
          declared !== undefined && Number(declared) > RPC_BODY_LIMIT
            ? `content-length ${declared}`
            : `no content-length: over ${RPC_BODY_LIMIT} bytes read`;
        const message = `request body exceeds ${RPC_BODY_LIMIT} bytes (${size})`;
        return refuse(req, reply, 413, 'PAYLOAD_TOO_LARGE', message, { limit: RPC_BODY_LIMIT });
      }
      if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return refuseMediaType(req, reply);
      if (err.statusCode !== undefined && err.statusCode < 500) {
        return refuse(req, reply, err.statusCode, 'INVALID_REQUEST', err.message);
      }
      o.logger.error({ err }, 'unhandled error answering /rpc');
      return sendWireError(reply, 500, makeWireError('INTERNAL', 'internal error'));
    });

    scope.post('/rpc', { bodyLimit: RPC_BODY_LIMIT }, (req, reply) => {
      // No content type and no body: fastify parses nothing; refuse it as a wrong type.
      if (typeof req.body !== 'string') return refuseMediaType(req, reply);
      if (o.statusOnly?.(req) === true && !isStatusCall(req.body)) return o.refuseReserved?.(reply);
      const answer = dispatcher.handleText(req.body, callerOf(req.headers));
      return answer instanceof Promise ? answer.then((a) => send(reply, a)) : send(reply, answer);
    });

    // Every other method: 405 before any body is read (an onRequest hook runs before parsing).
    const others = app.supportedMethods.filter((m) => m !== 'POST');
    scope.route({
      method: others,
      url: '/rpc',
      exposeHeadRoute: false,
      onRequest: async (req, reply) => {
        const message = `/rpc takes POST, not ${req.method}`;
        return refuse(req, reply, 405, 'INVALID_REQUEST', message, { method: req.method }, { allow: 'POST' });
      },
      handler: async () => {
        throw new Error('unreachable: the onRequest hook answers every request');
      },
    });
    done();
  });
}

function send(reply: FastifyReply, answer: string | null): FastifyReply {
  if (answer === null) return reply.code(204).send();
  return reply.type('application/json; charset=utf-8').send(answer);
}
