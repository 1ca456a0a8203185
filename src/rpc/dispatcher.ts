/**
 * JSON-RPC 2.0 dispatch on top of json-rpc-2.0's JSONRPCServer: request validation the library
 * does not do (non-object batch members, bad ids, positional params), params validation with
 * the method's zod schema, the draining/readiness gate for mutating methods, per-call metrics
 * and one log line per call.
 */
import {
  JSONRPCServer,
  createJSONRPCErrorResponse,
  createJSONRPCSuccessResponse,
  type JSONRPCRequest,
  type JSONRPCResponse,
  type JSONRPCID,
} from 'json-rpc-2.0';
import type { Logger } from 'pino';
import { DrainingError, InvalidParamsError, UnavailableError } from '../errors.js';
import type { Metrics } from '../metrics/metrics.js';
import { makeWireError, toWireError, wireCodeOf } from './error-map.js';
import { RawJson, serializeResponse } from './raw-json.js';
import type { CallContext, MethodDescriptor } from './method.js';
import type { RpcServices } from './services.js';

export type RpcResponse = JSONRPCResponse | JSONRPCResponse[] | null;

export interface DispatcherOptions {
  methods: readonly MethodDescriptor[];
  services: RpcServices;
  metrics: Metrics;
  logger: Logger;
  /** Mutating calls are refused with DRAINING while this returns true. */
  isDraining: () => boolean;
  /** Mutating calls are refused with UNAVAILABLE until this returns true. */
  isReady: () => boolean;
  now?: () => number;
}

export interface Dispatcher {
  /** Dispatch an already parsed body (single request or batch). */
  handle(body: unknown, caller: string): Promise<RpcResponse>;
  /**
   * Wire in, wire out (the HTTP endpoint): the request text, and the response bytes (UTF-8
   * JSON) or null when there is nothing to answer (notifications). Invalid JSON answers a parse
   * error. The answer comes back synchronously when it is known at once (an invalid request, a
   * current cached read), so a status poll costs no promise.
   */
  handleText(text: string, caller: string): Buffer | null | Promise<Buffer | null>;
}

interface ReadCache {
  key: string | null;
  result: RawJson | null;
}

interface ReadCacheEntry {
  cacheKey: (services: RpcServices) => string;
  cache: ReadCache;
}

/**
 * The last request text answered from a read cache, with its wire answer: a poller sends the
 * same bytes every time, and while the cache entry is current the answer to them is the same.
 */
interface RepeatedRead {
  text: string;
  method: string;
  entry: ReadCacheEntry;
  result: RawJson;
  answer: Buffer;
}

/** `{}` — not an array: positional params (`[]`) are refused, never taken as "no params". */
function isEmptyObject(v: unknown): boolean {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  for (const _ in v) return false;
  return true;
}

function isValidId(id: unknown): id is JSONRPCID {
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) || id === null;
}

function errorResponse(
  id: JSONRPCID,
  code: Parameters<typeof makeWireError>[0],
  message: string,
  data = {},
): JSONRPCResponse {
  const e = makeWireError(code, message, data);
  return createJSONRPCErrorResponse(id, e.code, e.message, e.data);
}

/** Screen one batch member; returns an error response for anything that is not a request. */
function screen(member: unknown): JSONRPCResponse | null {
  if (typeof member !== 'object' || member === null || Array.isArray(member)) {
    return errorResponse(null, 'INVALID_REQUEST', 'invalid request: expected a JSON-RPC request object');
  }
  const r = member as Record<string, unknown>;
  const id = 'id' in r && isValidId(r.id) ? r.id : null;
  if ('id' in r && !isValidId(r.id)) {
    return errorResponse(null, 'INVALID_REQUEST', 'invalid request: id must be a string, a number or null');
  }
  if (r.jsonrpc !== '2.0') {
    return errorResponse(
      id,
      'INVALID_REQUEST',
      `invalid request: jsonrpc must be "2.0", got ${JSON.stringify(r.jsonrpc)}`,
    );
  }
  if (typeof r.method !== 'string')
    return errorResponse(id, 'INVALID_REQUEST', 'invalid request: method must be a string');
  if ('params' in r && (typeof r.params !== 'object' || r.params === null)) {
    return errorResponse(id, 'INVALID_REQUEST', 'invalid request: params must be an object or an array');
  }
  return null;
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { metrics, logger } = options;
  const now = options.now ?? (() => performance.now());
  const server = new JSONRPCServer<CallContext>({ errorListener: () => undefined });
  const known = new Set(options.methods.map((m) => m.name));

  server.mapErrorToJSONRPCErrorResponse = (id, err: unknown) => {
    const { error, internal } = toWireError(err);
    if (internal) logger.error({ err }, 'internal error in a JSON-RPC method');
    return createJSONRPCErrorResponse(id, error.code, error.message, error.data);
  };
  server.handleMethodNotFound = async (request: JSONRPCRequest) =>
    request.id === undefined
      ? null
      : errorResponse(
          request.id,
          'METHOD_NOT_FOUND',
          `no such method: ${request.method} (see rpc.discover)`,
          {
            method: request.method,
          },
        );

  // Cached reads by method name (see `cacheKey`), shared with the fast path in `single`.
  const readCaches = new Map<string, ReadCacheEntry>();
  for (const method of options.methods) {
    // Most calls carry no params: validate `{}` once, up front, and reuse the frozen result.
    const empty = method.params.safeParse({});
    const emptyParams: unknown = empty.success ? Object.freeze(empty.data) : undefined;
    const cache: ReadCache = { key: null, result: null };
    if (method.cacheKey && !method.mutating && emptyParams !== undefined) {
      readCaches.set(method.name, { cacheKey: method.cacheKey, cache });
    }
    server.addMethod(method.name, async (rawParams: unknown, ctx: CallContext) => {
      if (Array.isArray(rawParams)) {
        throw new InvalidParamsError(
          `${method.name}: params must be an object of named parameters, not an array`,
          [],
        );
      }
      if (
        !method.mutating &&
        emptyParams !== undefined &&
        (rawParams === undefined || isEmptyObject(rawParams))
      ) {
        if (!method.cacheKey) return method.handler(emptyParams, ctx);
        const key = method.cacheKey(ctx.services);
        if (cache.key === key && cache.result) return cache.result;
        const result = new RawJson(JSON.stringify(await method.handler(emptyParams, ctx)));
        cache.key = key;
        cache.result = result;
        return result;
      }
      const parsed = method.params.safeParse(rawParams ?? {});
      if (!parsed.success) {
        const issues = parsed.error.issues.map((i) => ({
          path: i.path.join('.'),
          message: i.message,
          code: i.code,
        }));
        const first = issues[0];
        throw new InvalidParamsError(
          `${method.name}: invalid params${first ? `: ${first.path || '(params)'}: ${first.message}` : ''}`,
          issues,
        );
      }
      if (method.mutating) {
        if (options.isDraining()) throw new DrainingError();
        if (!options.isReady())
          throw new UnavailableError('agentd is still recovering; retry once /readyz answers 200');
      }
      return method.handler(parsed.data, ctx);
    });
  }

  const logCalls = logger.isLevelEnabled('info');

  /**
   * The polled read (`status`) whose cached answer is still current is answered here, without
   * JSONRPCServer's promise chain: measured, that chain was most of the per-call cost of a
   * status poll. Anything else — a stale cache, params, a notification — goes the full way.
   */
  function cachedRead(request: JSONRPCRequest): JSONRPCResponse | null {
    if (request.id === undefined) return null;
    const entry = readCaches.get(request.method);
    if (!entry || !(request.params === undefined || isEmptyObject(request.params))) return null;
    if (!isCurrent(entry)) return null;
    return createJSONRPCSuccessResponse(request.id, entry.cache.result);
  }

  function isCurrent(entry: ReadCacheEntry): boolean {
    return entry.cache.result !== null && entry.cache.key === entry.cacheKey(options.services);
  }

  /** Count, time and log one call. */
  function record(
    request: JSONRPCRequest,
    bad: boolean,
    response: JSONRPCResponse | null,
    ctx: CallContext,
    started: number,
  ): void {
    const method = bad ? '(invalid)' : known.has(request.method) ? request.method : '(unknown)';
    const code = response && 'error' in response && response.error ? wireCodeOf(response.error) : 'ok';
    count(method, code, ctx.caller, started);
  }

  function count(method: string, code: string, caller: string, started: number): void {
    const seconds = (now() - started) / 1000;
    metrics.rpcCalls.method(method).record(code, seconds);
    if (logCalls) {
      logger.info({ rpc: method, code, caller, durationMs: Math.round(seconds * 1e5) / 100 }, 'rpc');
    }
  }

  /** One call; answered synchronously when it is invalid or a current cached read. */
  function single(
    member: unknown,
    ctx: CallContext,
  ): JSONRPCResponse | null | Promise<JSONRPCResponse | null> {
    const started = now();
    const bad = screen(member);
    const request = member as JSONRPCRequest;
    const quick = bad ?? cachedRead(request);
    if (quick !== null) {
      record(request, bad !== null, quick, ctx, started);
      return quick;
    }
    return Promise.resolve(server.receive(request, ctx)).then((response) => {
      record(request, false, response, ctx, started);
      return response;
    });
  }

  const handleAny = (body: unknown, caller: string): RpcResponse | Promise<RpcResponse> => {
    const ctx: CallContext = { caller, services: options.services };
    if (Array.isArray(body)) {
      return handleBatch(body, ctx);
    }
    return single(body, ctx);
  };

  const handleBatch = async (body: unknown[], ctx: CallContext): Promise<RpcResponse> => {
    if (body.length === 0) return errorResponse(null, 'INVALID_REQUEST', 'invalid request: empty batch');
    const responses = (await Promise.all(body.map((m) => single(m, ctx)))).filter(
      (r): r is JSONRPCResponse => r !== null,
    );
    return responses.length === 0 ? null : responses;
  };

  // In-process callers get a promise; a synchronous answer is wrapped once, here.
  const handle = (body: unknown, caller: string): Promise<RpcResponse> =>
    Promise.resolve(handleAny(body, caller));

  let repeated: RepeatedRead | null = null;

  /** Remember `answer` when it is a read cache's current result for exactly this `text`. */
  function rememberRepeat(text: string, body: unknown, response: RpcResponse, answer: Buffer): void {
    if (response === null || Array.isArray(response) || !('result' in response)) return;
    const { result } = response;
    if (!(result instanceof RawJson)) return;
    const method = (body as JSONRPCRequest).method;
    const entry = readCaches.get(method);
    if (entry?.cache.result === result) repeated = { text, method, entry, result, answer };
  }

  // Bytes, not text: a remembered answer is then written as it is, with no encoding per call.
  const wire = (response: RpcResponse): Buffer | null =>
    response === null ? null : Buffer.from(serializeResponse(response));

  const handleText = (text: string, caller: string): Buffer | null | Promise<Buffer | null> => {
    const r = repeated;
    if (r !== null && text === r.text && r.entry.cache.result === r.result && isCurrent(r.entry)) {
      count(r.method, 'ok', caller, now());
      return r.answer;
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      return wire(errorResponse(null, 'PARSE_ERROR', `parse error: ${(err as Error).message}`));
    }
    const response = handleAny(body, caller);
    if (response instanceof Promise) return response.then(wire);
    const answer = wire(response);
    if (answer !== null) rememberRepeat(text, body, response, answer);
    return answer;
  };

  return { handle, handleText };
}
