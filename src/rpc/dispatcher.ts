/**
 * JSON-RPC 2.0 dispatch (https://www.jsonrpc.org/specification), owned here rather than layered
 * on a generic library: the usual npm one answers a batch of one answer with a bare object,
 * against section 6 of the specification, and none gives the limits on batch and answer size
 * or one place that validates, gates, counts and logs each call (docs/architecture.md, "Why the
 * dispatcher is the project's own"). The rules are in docs/api.md:
 *
 * - requests are screened (jsonrpc "2.0", a string method, a valid id, named params), params are
 *   validated with the method's zod schema, and mutating methods are refused while draining
 *   (DRAINING) or before ready (UNAVAILABLE);
 * - a batch holds at most `MAX_BATCH_CALLS` calls (else BATCH_TOO_LARGE, and nothing runs), and
 *   an answer at most `MAX_ANSWER_BYTES` (a read whose answer would pass it gets
 *   RESPONSE_TOO_LARGE instead; the answer of a mutating call is always given: it has happened);
 * - a method that declares a `version` (status) is serialized once per version: its result's
 *   JSON is kept with the version it was made at and reused while the version holds;
 * - every call is counted and timed; read-only calls log at debug, mutating calls and errors at
 *   info. Requests the HTTP route refuses before they reach here (405, 413, 415) are counted
 *   and logged here too (`refused`), under the method label `(invalid)`.
 */
import type { Logger } from 'pino';
import type * as z from 'zod';
import { DrainingError, InvalidParamsError, UnavailableError, type ErrorCode } from '../errors.js';
import type { Metrics } from '../metrics/metrics.js';
import { makeWireError, toWireError, type WireError } from './error-map.js';
import type { CallContext, MethodDescriptor } from './method.js';
import type { RpcServices } from './services.js';

/** Most calls in one batch. A script's batch is a handful; the cap keeps one request bounded. */
export const MAX_BATCH_CALLS = 100;
/** Largest answer, in bytes of JSON (a single call's, or a whole batch's). */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

export type RpcId = string | number | null;

export type RpcResponse =
  { jsonrpc: '2.0'; id: RpcId; result: unknown } | { jsonrpc: '2.0'; id: RpcId; error: WireError };

/** The answer to a body: one response, a batch of them, or nothing (notifications only). */
export type RpcAnswer = RpcResponse | RpcResponse[] | null;

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
  /** In-process callers (the watcher): a parsed body in, the answer as plain data out. */
  handle(body: unknown, caller: string): Promise<RpcAnswer>;
  /**
   * The HTTP route: the request text in, the answer's JSON text out, or null when there is
   * nothing to answer (notifications). Synchronous when the answer is known at once (an invalid
   * request, a current `status`).
   */
  handleText(text: string, caller: string): WireAnswer | Promise<WireAnswer>;
  /**
   * Count and log a request the HTTP route refused before reading it as JSON-RPC (a wrong
   * HTTP method, a body too large, a wrong content type): under the method label `(invalid)`
   * with its error code, logged at info with `reason` (docs/metrics.md).
   */
  refused(code: ErrorCode, reason: string, caller: string): void;
}

/** JSON text; null for no answer. */
export type WireAnswer = string | null;

/** One call's answer text (null for a notification). */
interface Answered {
  text: string | null;
  /** Answers of mutating calls are never replaced by RESPONSE_TOO_LARGE. */
  mutating: boolean;
}

/** A serialized result and the version it was made at. */
interface Cached {
  version: number;
  json: string;
}

type MaybePromise<T> = T | Promise<T>;

const isValidId = (id: unknown): id is RpcId =>
  typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) || id === null;

/** `{}` — not an array: positional params (`[]`) are refused, never taken as "no params". */
function isEmptyObject(v: unknown): boolean {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  for (const _ in v) return false;
  return true;
}

const errorText = (id: RpcId, error: WireError): string => JSON.stringify({ jsonrpc: '2.0', id, error });

/** The UTF-8 size of `text`, counted only when it might pass `limit` (JSON is mostly ASCII). */
function exceeds(text: string, limit: number): boolean {
  return text.length > limit / 3 && Buffer.byteLength(text) > limit;
}

/** Why a value is not a JSON-RPC request, or null when it is one. */
function screen(member: unknown): { id: RpcId; message: string } | null {
  if (typeof member !== 'object' || member === null || Array.isArray(member)) {
    return { id: null, message: 'invalid request: expected a JSON-RPC request object' };
  }
  const r = member as Record<string, unknown>;
  if ('id' in r && !isValidId(r.id)) {
    return { id: null, message: 'invalid request: id must be a string, a number or null' };
  }
  const id = 'id' in r ? (r.id as RpcId) : null;
  if (r.jsonrpc !== '2.0') {
    return { id, message: `invalid request: jsonrpc must be "2.0", got ${JSON.stringify(r.jsonrpc)}` };
  }
  if (typeof r.method !== 'string') return { id, message: 'invalid request: method must be a string' };
  if ('params' in r && (typeof r.params !== 'object' || r.params === null)) {
    return { id, message: 'invalid request: params must be an object or an array' };
  }
  return null;
}

/** One problem with a call's params; `path` is relative to params (`set.image`; '' for params itself). */
export interface ParamIssue {
  path: string;
  message: string;
  code: string;
}

/**
 * zod's issues as agentd reports them. An unknown key is reported by zod on the object that holds
 * it (`set`, or params itself, with the keys in `keys`): here each unknown key is its own issue at
 * its own path (`set.forse: unknown key`), so the message names the key, not its parent. A record
 * key that fails its schema (a label key) gets the key schema's message, not zod's bare
 * "Invalid key in record".
 */
export function paramIssues(issues: readonly z.core.$ZodIssue[]): ParamIssue[] {
  return issues.flatMap((i): ParamIssue[] => {
    const at = i.path.map(String);
    if (i.code === 'unrecognized_keys') {
      return i.keys.map((key) => ({ path: [...at, key].join('.'), message: 'unknown key', code: i.code }));
    }
    if (i.code === 'invalid_key') {
      // A record key that fails its schema: zod says only "Invalid key in record"; say why.
      const why = i.issues.map((inner) => inner.message).join('; ');
      return [{ path: at.join('.'), message: `invalid key: ${why || i.message}`, code: i.code }];
    }
    return [{ path: at.join('.'), message: i.message, code: i.code }];
  });
}

/** INVALID_PARAMS naming the first issue's path from params (`params.set.image: ...`); all in data.issues. */
function invalidParams(method: string, issues: ParamIssue[]): InvalidParamsError {
  const first = issues[0];
  const where = first === undefined ? '' : `: ${first.path === '' ? 'params' : `params.${first.path}`}`;
  return new InvalidParamsError(
    `${method}: invalid params${first ? `${where}: ${first.message}` : ''}`,
    issues,
  );
}

/** One call under way: what its answer and its count need once the result is known. */
interface Call {
  entry: Entry;
  id: RpcId;
  idJson: string;
  notification: boolean;
  caller: string;
  started: number;
}

/**
 * What one request object turns into before anything runs: a refusal with its answer, or a call
 * of a known method.
 */
type Prepared =
  | { kind: 'refused'; label: '(invalid)' | '(unknown)'; code: string; text: string | null }
  | {
      kind: 'call';
      entry: Entry;
      id: RpcId;
      idJson: string;
      notification: boolean;
      /** The request's params, validated on each call... */
      rawParams: unknown;
      /** ...unless they are the method's validated empty params (a poll's `{}` or none). */
      params: unknown;
    };

interface Entry {
  method: MethodDescriptor;
  /** `{}` validated once: most calls carry no params (undefined when `{}` is not valid). */
  emptyParams: unknown;
  /** The serialized result and the version it was made at (methods with a `version`). */
  cached: Cached | null;
}

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { metrics, logger, services } = options;
  const now = options.now ?? (() => performance.now());
  const infoOn = logger.isLevelEnabled('info');
  const debugOn = logger.isLevelEnabled('debug');
  const entries = new Map<string, Entry>();
  for (const method of options.methods) {
    const empty = method.params.safeParse({});
    entries.set(method.name, {
      method,
      emptyParams: empty.success ? Object.freeze(empty.data) : undefined,
      cached: null,
    });
  }

  /** Count, time and log one call (a notification too); `reason` says why a request was refused. */
  function record(
    label: string,
    mutating: boolean,
    code: string,
    caller: string,
    started: number,
    reason?: string,
  ): void {
    const seconds = (now() - started) / 1000;
    metrics.rpcRequests.inc({ method: label, code });
    metrics.rpcDuration.observe({ method: label }, seconds);
    // Polls are debug; what changes the node, and every failure, is info.
    const level = mutating || code !== 'ok' ? 'info' : 'debug';
    if (level === 'info' ? infoOn : debugOn) {
      const durationMs = Math.round(seconds * 1e5) / 100;
      const fields = { rpc: label, code, caller, durationMs };
      logger[level](
        reason === undefined ? fields : { ...fields, reason },
        `rpc ${label} answered ${code} in ${durationMs} ms`,
      );
    }
  }

  function validate(entry: Entry, rawParams: unknown): unknown {
    const { method } = entry;
    if (Array.isArray(rawParams)) {
      // JSON-RPC allows positional params; agentd's methods take named ones only (docs/api.md).
      throw invalidParams(method.name, [
        {
          path: '',
          message: 'must be an object of named parameters, not an array (positional params)',
          code: 'invalid_type',
        },
      ]);
    }
    const parsed = method.params.safeParse(rawParams ?? {});
    if (parsed.success) return parsed.data;
    throw invalidParams(method.name, paramIssues(parsed.error.issues));
  }

  /** The result's JSON: from the cache while the method's version holds, else from the handler. */
  function run(entry: Entry, params: unknown, ctx: CallContext): MaybePromise<string> {
    const { method } = entry;
    if (method.version === undefined || params !== entry.emptyParams) {
      return method.handler(params, ctx).then((result) => JSON.stringify(result) ?? 'null');
    }
    // Read the version before the data: a change during the call then moves it on, and the
    // next call computes afresh; an answer is never stored under a newer version than its data.
    const version = method.version(ctx.services);
    const cached = entry.cached;
    if (cached !== null && cached.version === version) return cached.json;
    return method.handler(params, ctx).then((result) => {
      const json = JSON.stringify(result) ?? 'null';
      entry.cached = { version, json };
      return json;
    });
  }

  /** Screen one request object and find its method (pure: see `Prepared`). */
  function prepare(member: unknown): Prepared {
    const bad = screen(member);
    if (bad !== null) {
      const error = makeWireError('INVALID_REQUEST', bad.message);
      return { kind: 'refused', label: '(invalid)', code: 'INVALID_REQUEST', text: errorText(bad.id, error) };
    }
    const request = member as { id?: RpcId; method: string; params?: unknown };
    const notification = !('id' in request);
    const id = request.id ?? null;
    const entry = entries.get(request.method);
    if (entry === undefined) {
      const error = makeWireError(
        'METHOD_NOT_FOUND',
        `no such method: ${request.method} (see rpc.discover)`,
        { method: request.method },
      );
      const text = notification ? null : errorText(id, error);
      return { kind: 'refused', label: '(unknown)', code: 'METHOD_NOT_FOUND', text };
    }
    const raw = request.params;
    const empty = entry.emptyParams !== undefined && (raw === undefined || isEmptyObject(raw));
    return {
      kind: 'call',
      entry,
      id,
      idJson: JSON.stringify(id),
      notification,
      rawParams: raw,
      params: empty ? entry.emptyParams : undefined,
    };
  }

  /** Run one prepared request, counted; synchronous when its answer is known at once. */
  function perform(p: Prepared, ctx: CallContext): MaybePromise<Answered> {
    const started = now();
    if (p.kind === 'refused') {
      record(p.label, false, p.code, ctx.caller, started);
      return { text: p.text, mutating: false };
    }
    const { entry } = p;
    const c: Call = {
      entry,
      id: p.id,
      idJson: p.idJson,
      notification: p.notification,
      caller: ctx.caller,
      started,
    };
    let json: MaybePromise<string>;
    try {
      const params = p.params ?? validate(entry, p.rawParams);
      if (entry.method.mutating) {
        if (options.isDraining()) throw new DrainingError();
        if (!options.isReady()) {
          throw new UnavailableError(
            'agentd is still starting (startup recovery has not finished); retry once /readyz answers 200',
          );
        }
      }
      json = run(entry, params, ctx);
    } catch (err) {
      return failed(c, err);
    }
    // No closures on the synchronous path (a cached `status` poll): it allocates nothing it can avoid.
    return typeof json === 'string'
      ? succeeded(c, json)
      : json.then(
          (j) => succeeded(c, j),
          (err: unknown) => failed(c, err),
        );
  }

  function failed(c: Call, err: unknown): Answered {
    const { method } = c.entry;
    const { error, internal } = toWireError(err);
    if (internal) logger.error({ err, rpc: method.name }, 'internal error in a JSON-RPC method');
    record(method.name, method.mutating, String(error.data.code), c.caller, c.started);
    return { text: c.notification ? null : errorText(c.id, error), mutating: method.mutating };
  }

  function succeeded(c: Call, json: string): Answered {
    const { method } = c.entry;
    record(method.name, method.mutating, 'ok', c.caller, c.started);
    if (c.notification) return { text: null, mutating: method.mutating };
    return { text: `{"jsonrpc":"2.0","id":${c.idJson},"result":${json}}`, mutating: method.mutating };
  }

  /** A single answer within the answer limit (a read's answer past it becomes an error). */
  function single(answered: Answered, member: unknown): WireAnswer {
    const { text } = answered;
    if (text === null || answered.mutating || !exceeds(text, MAX_ANSWER_BYTES)) return text;
    return errorText((member as { id: RpcId }).id, tooLarge());
  }

  function tooLarge(): WireError {
    return makeWireError(
      'RESPONSE_TOO_LARGE',
      `the answer exceeds ${MAX_ANSWER_BYTES} bytes; ask for less (operations.list limit, fewer calls per batch)`,
      { limit: MAX_ANSWER_BYTES },
    );
  }

  /**
   * A batch's answers in order, within the answer limit: a read whose answer would take the
   * total past it is answered RESPONSE_TOO_LARGE instead; mutating calls keep their answers.
   */
  function joinBatch(answers: readonly Answered[], members: readonly unknown[]): string | null {
    const parts: string[] = [];
    let size = 2;
    answers.forEach((a, i) => {
      let text = a.text;
      if (text === null) return;
      const bytes = Buffer.byteLength(text) + 1;
      if (!a.mutating && size + bytes > MAX_ANSWER_BYTES) {
        text = errorText((members[i] as { id: RpcId }).id, tooLarge());
      }
      size += Buffer.byteLength(text) + 1;
      parts.push(text);
    });
    return parts.length === 0 ? null : `[${parts.join(',')}]`;
  }

  function batch(members: unknown[], ctx: CallContext): MaybePromise<string | null> {
    if (members.length === 0) {
      record('(invalid)', false, 'INVALID_REQUEST', ctx.caller, now());
      return errorText(null, makeWireError('INVALID_REQUEST', 'invalid request: empty batch'));
    }
    if (members.length > MAX_BATCH_CALLS) {
      // Refused whole, before anything runs: nothing of it has happened.
      record('(batch)', false, 'BATCH_TOO_LARGE', ctx.caller, now());
      return errorText(
        null,
        makeWireError(
          'BATCH_TOO_LARGE',
          `a batch may hold at most ${MAX_BATCH_CALLS} calls; this one has ${members.length}: split it`,
          { limit: MAX_BATCH_CALLS, calls: members.length },
        ),
      );
    }
    const answers = members.map((m) => perform(prepare(m), ctx));
    if (answers.every((a): a is Answered => !(a instanceof Promise))) return joinBatch(answers, members);
    return Promise.all(answers).then((all) => joinBatch(all, members));
  }

  /** Answer a parsed body. */
  function dispatch(body: unknown, caller: string): MaybePromise<WireAnswer> {
    const ctx: CallContext = { caller, services };
    if (Array.isArray(body)) return batch(body, ctx);
    const answered = perform(prepare(body), ctx);
    return answered instanceof Promise ? answered.then((a) => single(a, body)) : single(answered, body);
  }

  const parseError = (err: unknown, caller: string): string => {
    record('(invalid)', false, 'PARSE_ERROR', caller, now());
    return errorText(null, makeWireError('PARSE_ERROR', `parse error: ${(err as Error).message}`));
  };

  return {
    handleText(text, caller) {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch (err) {
        return parseError(err, caller);
      }
      return dispatch(body, caller);
    },
    refused(code, reason, caller) {
      record('(invalid)', false, code, caller, now(), reason);
    },
    async handle(body, caller) {
      // The same path as the wire, so in-process callers get exactly what a client would.
      const answer = await dispatch(body, caller);
      return answer === null ? null : (JSON.parse(answer) as RpcAnswer);
    },
  };
}
