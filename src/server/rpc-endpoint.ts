/**
 * `/rpc` as a bare node:http handler, in front of fastify (see `createAdminApp`): `POST` is
 * served, any other method answered 405.
 *
 * It is the one hot route: scripts and monitoring poll `status` over it. Measured on 2 cores,
 * fastify's routing, content-type parsing and reply pipeline cost more per call than the whole
 * JSON-RPC dispatch of a cached read, so this route reads the body, checks the limits and the
 * content type, and writes the answer itself. Every other route stays on fastify; fastify hooks
 * and plugins never see /rpc, so anything every request needs must be added here too.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Dispatcher, WireAnswer } from '../rpc/dispatcher.js';
import { makeWireError, type WireError } from '../rpc/error-map.js';
import { RPC_BODY_LIMIT } from '../rpc/limits.js';

export { RPC_BODY_LIMIT };
const LIMIT_DIGITS = String(RPC_BODY_LIMIT).length;

/**
 * Media types accepted on /rpc (parameters such as `charset` are allowed). Compared as strings,
 * not looked up in a Set: the header's value is a new string on every request, and a Set would
 * hash it each time.
 */
const isRpcMediaType = (type: string): boolean =>
  type === 'application/json' || type === 'application/json-rpc';

export interface RpcEndpointOptions {
  dispatcher: Dispatcher;
  logger: Logger;
  /** True once the server is closing: new calls get 503, as fastify's other routes do. */
  isClosing: () => boolean;
}

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * True for the requests the endpoint answers: any method on `/rpc`, with or without a query
 * string (`POST` is served; any other method gets 405 with `Allow: POST`).
 */
export function isRpcRoute(req: IncomingMessage): boolean {
  const url = req.url ?? '';
  return url === '/rpc' || url.startsWith('/rpc?');
}

/** Who called, for logs and `requestedBy`: `x-agentd-caller`, else the user agent (docs/api.md). */
function callerOf(req: IncomingMessage): string {
  return String(req.headers['x-agentd-caller'] ?? req.headers['user-agent'] ?? 'http').slice(0, 64);
}

function mediaTypeOf(header: string | undefined): string {
  if (header === undefined) return '';
  if (header === 'application/json') return header;
  const semi = header.indexOf(';');
  return (semi === -1 ? header : header.slice(0, semi)).trim().toLowerCase();
}

function sendJson(res: ServerResponse, status: number, body: string | Buffer, close = false): void {
  const headers: Record<string, string | number> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  };
  // A refused body is not read: closing the connection keeps us from draining it.
  if (close) headers.connection = 'close';
  res.writeHead(status, headers);
  res.end(body);
}

function sendError(
  res: ServerResponse,
  status: number,
  error: WireError,
  headers: Record<string, string> = {},
): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  sendJson(res, status, JSON.stringify({ jsonrpc: '2.0', id: null, error }), true);
}

export function createRpcEndpoint(o: RpcEndpointOptions): RequestHandler {
  const { dispatcher, logger } = o;
  const debug = logger.isLevelEnabled('debug');

  /**
   * Answer a request refused before it is read as JSON-RPC; it is counted under `(invalid)` and
   * logged at info with the reason, like a call the dispatcher refuses (docs/metrics.md).
   */
  const refuse = (
    req: IncomingMessage,
    res: ServerResponse,
    status: number,
    code: 'INVALID_REQUEST' | 'PAYLOAD_TOO_LARGE',
    message: string,
    data: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ): void => {
    dispatcher.refused(code, `HTTP ${status}: ${message}`, callerOf(req));
    sendError(res, status, makeWireError(code, message, data), headers);
  };

  const tooLarge = (req: IncomingMessage, res: ServerResponse, size: string): void =>
    refuse(req, res, 413, 'PAYLOAD_TOO_LARGE', `request body exceeds ${RPC_BODY_LIMIT} bytes (${size})`, {
      limit: RPC_BODY_LIMIT,
    });

  const answer = (res: ServerResponse, text: WireAnswer): void => {
    if (text === null) {
      res.writeHead(204);
      res.end();
    } else {
      sendJson(res, 200, text);
    }
  };

  const failed = (res: ServerResponse, err: unknown): void => {
    logger.error({ err }, 'unhandled error answering /rpc');
    if (!res.headersSent) sendError(res, 500, makeWireError('INTERNAL', 'internal error'));
    else res.destroy();
  };

  const dispatch = (req: IncomingMessage, res: ServerResponse, text: string): void => {
    const caller = callerOf(req);
    let response: WireAnswer | Promise<WireAnswer>;
    try {
      response = dispatcher.handleText(text, caller);
    } catch (err) {
      failed(res, err);
      return;
    }
    if (response instanceof Promise) {
      response.then(
        (r) => answer(res, r),
        (err: unknown) => failed(res, err),
      );
    } else {
      answer(res, response);
    }
  };

  return (req, res) => {
    if (debug) {
      const started = performance.now();
      res.once('finish', () =>
        logger.debug(
          {
            http: req.method,
            url: req.url,
            status: res.statusCode,
            durationMs: Math.round((performance.now() - started) * 100) / 100,
          },
          `http ${req.method ?? ''} ${req.url ?? ''} answered ${res.statusCode} in ${Math.round((performance.now() - started) * 100) / 100} ms`,
        ),
      );
    }
    if (req.method !== 'POST') {
      const message = `/rpc takes POST, not ${String(req.method)}`;
      refuse(req, res, 405, 'INVALID_REQUEST', message, { method: req.method }, { allow: 'POST' });
      return;
    }
    if (o.isClosing()) {
      sendError(res, 503, makeWireError('DRAINING', 'agentd is shutting down and accepts no new calls'));
      return;
    }
    const type = req.headers['content-type'];
    if (!isRpcMediaType(mediaTypeOf(type))) {
      // Echoed to the client and the log: a header of any length is cut to a readable size.
      const shown = type?.slice(0, 100);
      const got = shown === undefined || shown === '' ? 'none' : JSON.stringify(shown);
      refuse(req, res, 415, 'INVALID_REQUEST', `content-type must be application/json, got ${got}`, {
        contentType: shown ?? null,
      });
      return;
    }
    const declared = req.headers['content-length'];
    // Only a length of as many digits as the limit can pass it: a poll's is not parsed.
    if (declared !== undefined && declared.length >= LIMIT_DIGITS && Number(declared) > RPC_BODY_LIMIT) {
      tooLarge(req, res, `content-length ${declared}`);
      return;
    }
    // Chunked bodies have no declared length: count while reading.
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > RPC_BODY_LIMIT) {
        req.off('data', onData);
        req.off('end', onEnd);
        chunks.length = 0;
        tooLarge(req, res, `over ${size} bytes read`);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      const [first] = chunks;
      const body = chunks.length === 1 && first ? first : Buffer.concat(chunks, size);
      dispatch(req, res, body.toString('utf8'));
    };
    // No 'error' listener: a client that goes away mid-body leaves nothing to answer, and an
    // IncomingMessage without one drops its error instead of throwing it.
    req.on('data', onData);
    req.on('end', onEnd);
  };
}
