import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import type { DrainPort, OperationsPort, StatusReader } from '../../../src/rpc/ports.js';
import { StatusVersion } from '../../../src/engine/status-version.js';
import { NotFoundError } from '../../../src/errors.js';
import { createMetrics, type Metrics } from '../../../src/metrics/metrics.js';
import {
  MAX_ANSWER_BYTES,
  MAX_BATCH_CALLS,
  createDispatcher,
  type Dispatcher,
} from '../../../src/rpc/dispatcher.js';
import { defineMethod, type MethodDescriptor } from '../../../src/rpc/method.js';
import type { RpcServices } from '../../../src/rpc/services.js';

/** A secret that must never reach the wire when a handler fails unexpectedly. */
const SECRET = 'postgres://admin:hunter2@db/agentd';

const echo = defineMethod({
  name: 'test.echo',
  summary: 'echo',
  description: 'Returns its params and the caller.',
  mutating: false,
  errors: [],
  params: z.strictObject({ word: z.string().default('hi'), times: z.number().int().min(1).optional() }),
  result: z.object({ word: z.string(), caller: z.string() }),
  handler: async (p, ctx) => ({ word: p.word.repeat(p.times ?? 1), caller: ctx.caller }),
});

const calls: string[] = [];
const mutate = defineMethod({
  name: 'test.mutate',
  summary: 'mutate',
  description: 'A mutating method: refused while draining or before ready.',
  mutating: true,
  errors: ['NOT_FOUND'],
  params: z.strictObject({}),
  result: z.object({ done: z.boolean() }),
  handler: async () => {
    calls.push('mutate');
    return { done: true };
  },
});

const missing = defineMethod({
  name: 'test.missing',
  summary: 'missing',
  description: 'Throws an AgentError.',
  mutating: false,
  errors: ['NOT_FOUND'],
  params: z.strictObject({}),
  result: z.object({}),
  handler: async () => {
    throw new NotFoundError('operation op-42', { data: { id: 'op-42' } });
  },
});

const crash = defineMethod({
  name: 'test.crash',
  summary: 'crash',
  description: 'Throws something unexpected.',
  mutating: false,
  errors: [],
  params: z.strictObject({}),
  result: z.object({}),
  handler: async () => {
    throw new Error(`connect ${SECRET} failed`);
  },
});

const METHODS = [echo, mutate, missing, crash] as unknown as readonly MethodDescriptor[];

interface Harness {
  dispatcher: Dispatcher;
  metrics: Metrics;
  logs: string[];
  state: { draining: boolean; ready: boolean };
}

/** The test methods here reach no engine port. */
const NO_PORTS = { status: {} as StatusReader, operations: {} as OperationsPort, drain: {} as DrainPort };

function setup(): Harness {
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const logger = pino({ level: 'debug' }, sink);
  const metrics = createMetrics({ version: 'test', collectDefaults: false });
  const state = { draining: false, ready: true };
  const services: RpcServices = {
    ...NO_PORTS,
    daemonInfo: () => ({ version: 'test', pid: 1, startedAt: '2026-01-01T00:00:00Z', state: 'ready' }),
    watcherStatus: () => null,
    statusVersion: new StatusVersion(),
    openrpc: () => ({}),
  };
  const dispatcher = createDispatcher({
    methods: METHODS,
    services,
    metrics,
    logger,
    isDraining: () => state.draining,
    isReady: () => state.ready,
  });
  return { dispatcher, metrics, logs, state };
}

type Resp = {
  jsonrpc: string;
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: Record<string, unknown> };
};

async function one(d: Dispatcher, body: unknown): Promise<Resp> {
  const r = await d.handle(body, 'test');
  expect(r).not.toBeNull();
  expect(Array.isArray(r)).toBe(false);
  return r as unknown as Resp;
}

async function many(d: Dispatcher, body: unknown): Promise<Resp[]> {
  const r = await d.handle(body, 'test');
  expect(Array.isArray(r)).toBe(true);
  return r as unknown as Resp[];
}

async function counter(metrics: Metrics, method: string, code: string): Promise<number> {
  const m = await metrics.rpcRequests.get();
  return m.values.find((v) => v.labels.method === method && v.labels.code === code)?.value ?? 0;
}

describe('dispatcher: valid calls', () => {
  it('answers a call with its result, id and the caller', async () => {
    const { dispatcher } = setup();
    const r = await dispatcher.handle(
      { jsonrpc: '2.0', id: 7, method: 'test.echo', params: { word: 'ab', times: 2 } },
      'agentctl',
    );
    expect(r).toEqual({ jsonrpc: '2.0', id: 7, result: { word: 'abab', caller: 'agentctl' } });
  });

  it('keeps string ids and fills param defaults when params are absent', async () => {
    const { dispatcher } = setup();
    expect(await one(dispatcher, { jsonrpc: '2.0', id: 'x-1', method: 'test.echo' })).toEqual({
      jsonrpc: '2.0',
      id: 'x-1',
      result: { word: 'hi', caller: 'test' },
    });
  });

  it('handleText parses the body first and answers the wire text', async () => {
    const { dispatcher } = setup();
    const r = await dispatcher.handleText('{"jsonrpc":"2.0","id":1,"method":"test.echo"}', 'c');
    expect(typeof r).toBe('string');
    expect(JSON.parse(r!.toString())).toMatchObject({ id: 1, result: { word: 'hi' } });
  });

  it('handleText answers null for a notification', async () => {
    const { dispatcher } = setup();
    expect(await dispatcher.handleText('{"jsonrpc":"2.0","method":"test.echo"}', 'c')).toBeNull();
  });

  it('a notification gets no response', async () => {
    const { dispatcher } = setup();
    expect(await dispatcher.handle({ jsonrpc: '2.0', method: 'test.echo' }, 'test')).toBeNull();
    // Not even when it fails: the client asked for no answer.
    expect(await dispatcher.handle({ jsonrpc: '2.0', method: 'test.crash' }, 'test')).toBeNull();
    expect(await dispatcher.handle({ jsonrpc: '2.0', method: 'nosuch' }, 'test')).toBeNull();
  });

  it('an AgentError keeps its numeric code, message and data, with the string code in data.code', async () => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 1, method: 'test.missing' });
    expect(r.error).toEqual({
      code: 1003,
      message: 'operation op-42 not found',
      data: { id: 'op-42', code: 'NOT_FOUND' },
    });
  });
});

describe('dispatcher: invalid requests', () => {
  it('malformed JSON is a parse error (-32700) with id null', async () => {
    const { dispatcher } = setup();
    const r = JSON.parse(
      (await dispatcher.handleText('{"jsonrpc": "2.0", "method"', 'test'))!.toString(),
    ) as Resp;
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(-32700);
    expect(r.error?.data?.code).toBe('PARSE_ERROR');
  });

  it('an empty body is a parse error', async () => {
    const { dispatcher } = setup();
    const r = JSON.parse((await dispatcher.handleText('', 'test'))!.toString()) as Resp;
    expect(r.error?.code).toBe(-32700);
  });

  it.each([
    ['a number', 42],
    ['a string', 'status'],
    ['null', null],
    ['true', true],
  ])('a request that is %s is an invalid request (-32600)', async (_name, body) => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, body);
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(-32600);
    expect(r.error?.data?.code).toBe('INVALID_REQUEST');
  });

  it.each([
    ['missing', { id: 1, method: 'test.echo' }],
    ['"1.0"', { jsonrpc: '1.0', id: 1, method: 'test.echo' }],
    ['a number', { jsonrpc: 2, id: 1, method: 'test.echo' }],
  ])('jsonrpc %s is an invalid request that keeps the id', async (_name, body) => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, body);
    expect(r.id).toBe(1);
    expect(r.error?.code).toBe(-32600);
    expect(r.error?.message).toContain('jsonrpc must be "2.0"');
  });

  it('a method that is not a string is an invalid request', async () => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 3, method: 5 });
    expect(r.id).toBe(3);
    expect(r.error?.code).toBe(-32600);
  });

  it('an id that is an object is an invalid request with id null', async () => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, { jsonrpc: '2.0', id: { a: 1 }, method: 'test.echo' });
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(-32600);
  });

  it('params that are neither object nor array are an invalid request', async () => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 4, method: 'test.echo', params: 'hi' });
    expect(r.error?.code).toBe(-32600);
  });

  it('an unknown method is -32601 with data.code METHOD_NOT_FOUND and the method name', async () => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 5, method: 'nosuch.method' });
    expect(r.id).toBe(5);
    expect(r.error?.code).toBe(-32601);
    expect(r.error?.data).toEqual({ code: 'METHOD_NOT_FOUND', method: 'nosuch.method' });
    expect(r.error?.message).toContain('nosuch.method');
  });

  it('params of the wrong shape are -32602 with the zod issues in data.issues', async () => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, {
      jsonrpc: '2.0',
      id: 6,
      method: 'test.echo',
      params: { word: 5, times: 0, extra: true },
    });
    expect(r.error?.code).toBe(-32602);
    expect(r.error?.data?.code).toBe('INVALID_PARAMS');
    const issues = r.error?.data?.issues as { path: string; message: string; code: string }[];
    expect(issues.map((i) => i.path).sort()).toEqual(['extra', 'times', 'word']);
    expect(issues.find((i) => i.path === 'word')?.code).toBe('invalid_type');
    expect(issues.find((i) => i.path === 'extra')).toEqual({
      path: 'extra',
      message: 'unknown key',
      code: 'unrecognized_keys',
    });
    expect(r.error?.message).toMatch(/^test\.echo: invalid params: params\.word: /);
  });

  it('an unknown key is named by its own path, at any depth, one issue per key', async () => {
    const nested = defineMethod({
      name: 'test.nested',
      summary: 'nested',
      description: 'Strict params with a strict object inside.',
      mutating: false,
      errors: [],
      params: z.strictObject({ set: z.strictObject({ image: z.string() }).optional() }),
      result: z.object({}),
      handler: async () => ({}),
    });
    const dispatcher = createDispatcher({
      methods: [nested] as unknown as readonly MethodDescriptor[],
      services: {} as RpcServices,
      metrics: createMetrics({ version: 'test', collectDefaults: false }),
      logger: pino({ level: 'silent' }),
      isDraining: () => false,
      isReady: () => true,
    });
    const top = await one(dispatcher, { jsonrpc: '2.0', id: 1, method: 'test.nested', params: { foo: 1 } });
    expect(top.error?.code).toBe(-32602);
    expect(top.error?.message).toBe('test.nested: invalid params: params.foo: unknown key');
    expect(top.error?.data?.issues).toEqual([
      { path: 'foo', message: 'unknown key', code: 'unrecognized_keys' },
    ]);

    const deep = await one(dispatcher, {
      jsonrpc: '2.0',
      id: 2,
      method: 'test.nested',
      params: { set: { image: 'x', imgae: 'y', tag: 'z' } },
    });
    expect(deep.error?.message).toBe('test.nested: invalid params: params.set.imgae: unknown key');
    expect((deep.error?.data?.issues as { path: string }[]).map((i) => i.path)).toEqual([
      'set.imgae',
      'set.tag',
    ]);
  });

  it('positional params are -32602 with an issue saying params must be an object', async () => {
    const { dispatcher, metrics } = setup();
    for (const params of [['hi'], []]) {
      const r = await one(dispatcher, { jsonrpc: '2.0', id: 8, method: 'test.echo', params });
      expect(r.id).toBe(8);
      expect(r.error?.code).toBe(-32602);
      expect(r.error?.message).toBe(
        'test.echo: invalid params: params: must be an object of named parameters, not an array (positional params)',
      );
      expect(r.error?.data?.issues).toEqual([
        {
          path: '',
          message: 'must be an object of named parameters, not an array (positional params)',
          code: 'invalid_type',
        },
      ]);
    }
    expect(await counter(metrics, 'test.echo', 'INVALID_PARAMS')).toBe(2);
  });

  it('an unexpected throw is -32603 and leaks nothing of the error', async () => {
    const { dispatcher, logs } = setup();
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 9, method: 'test.crash' });
    expect(r.error).toEqual({
      code: -32603,
      message: 'internal error; see the agentd log',
      data: { code: 'INTERNAL' },
    });
    expect(JSON.stringify(r)).not.toContain('hunter2');
    expect(JSON.stringify(r)).not.toContain('at ');
    // The details go to the log instead.
    expect(logs.join('')).toContain('hunter2');
  });
});

describe('dispatcher: batches', () => {
  it('an empty batch is one invalid request', async () => {
    const { dispatcher } = setup();
    const r = await one(dispatcher, []);
    expect(r.id).toBeNull();
    expect(r.error?.code).toBe(-32600);
    expect(r.error?.message).toContain('empty batch');
  });

  // JSON-RPC 2.0, section 6: a batch is answered with an array, even when one response is left;
  // the json-rpc-2.0 package answers these with a bare object (docs/architecture.md).
  it('a batch with one answer (one call, or a call and a notification, or [1]) answers an array of one', async () => {
    const { dispatcher } = setup();
    const call = { jsonrpc: '2.0', id: 1, method: 'test.echo' };
    expect(await dispatcher.handle([call], 'test')).toEqual([
      { jsonrpc: '2.0', id: 1, result: { word: 'hi', caller: 'test' } },
    ]);
    const withNotification = await many(dispatcher, [call, { jsonrpc: '2.0', method: 'test.echo' }]);
    expect(withNotification.map((r) => r.id)).toEqual([1]);
    const invalid = await many(dispatcher, [1]);
    expect(invalid.map((r) => [r.id, r.error?.code])).toEqual([[null, -32600]]);
    expect(await dispatcher.handleText('[{"jsonrpc":"2.0","id":2,"method":"test.echo"}]', 't')).toMatch(
      /^\[/,
    );
  });

  it('a batch of non-objects answers one invalid request per member', async () => {
    const { dispatcher } = setup();
    const r = await many(dispatcher, [1, 'two', null, [3]]);
    expect(r).toHaveLength(4);
    for (const resp of r) {
      expect(resp.id).toBeNull();
      expect(resp.error?.code).toBe(-32600);
    }
  });

  it('a mixed batch answers every call but no notification, ids matched', async () => {
    const { dispatcher } = setup();
    const r = await many(dispatcher, [
      { jsonrpc: '2.0', id: 1, method: 'test.echo', params: { word: 'a' } },
      { jsonrpc: '2.0', method: 'test.echo' }, // notification
      { jsonrpc: '2.0', id: 'b', method: 'nosuch' },
      42,
      { jsonrpc: '2.0', id: 3, method: 'test.echo', params: { word: 1 } },
      { jsonrpc: '2.0', method: 'nosuch' }, // notification of an unknown method
      { jsonrpc: '2.0', id: 4, method: 'test.echo', params: { word: 'd' } },
    ]);
    expect(r).toHaveLength(5);
    const byId = new Map(r.filter((x) => x.id !== null).map((x) => [x.id, x]));
    expect(byId.get(1)?.result).toEqual({ word: 'a', caller: 'test' });
    expect(byId.get('b')?.error?.code).toBe(-32601);
    expect(byId.get(3)?.error?.code).toBe(-32602);
    expect(byId.get(4)?.result).toEqual({ word: 'd', caller: 'test' });
    expect(r.filter((x) => x.id === null).map((x) => x.error?.code)).toEqual([-32600]);
  });

  it('a batch of only notifications answers nothing', async () => {
    const { dispatcher } = setup();
    const r = await dispatcher.handle(
      [
        { jsonrpc: '2.0', method: 'test.echo' },
        { jsonrpc: '2.0', method: 'test.mutate' },
      ],
      'test',
    );
    expect(r).toBeNull();
  });
});

describe('dispatcher: the gate for mutating methods', () => {
  it('runs a mutating method when ready', async () => {
    const { dispatcher } = setup();
    calls.length = 0;
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 1, method: 'test.mutate' });
    expect(r.result).toEqual({ done: true });
    expect(calls).toEqual(['mutate']);
  });

  it('refuses a mutating method with DRAINING while draining, without running it', async () => {
    const { dispatcher, state } = setup();
    state.draining = true;
    calls.length = 0;
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 1, method: 'test.mutate' });
    expect(r.error?.code).toBe(1002);
    expect(r.error?.data?.code).toBe('DRAINING');
    expect(calls).toEqual([]);
  });

  it('refuses a mutating method with UNAVAILABLE before ready, without running it', async () => {
    const { dispatcher, state } = setup();
    state.ready = false;
    calls.length = 0;
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 1, method: 'test.mutate' });
    expect(r.error?.code).toBe(1020);
    expect(r.error?.data?.code).toBe('UNAVAILABLE');
    expect(r.error?.message).toContain('/readyz');
    expect(calls).toEqual([]);
  });

  it('read-only methods are served while draining and before ready', async () => {
    const { dispatcher, state } = setup();
    state.draining = true;
    state.ready = false;
    expect((await one(dispatcher, { jsonrpc: '2.0', id: 1, method: 'test.echo' })).result).toBeDefined();
  });

  it('the same request text, repeated, is gated and run on every call', async () => {
    const { dispatcher, state } = setup();
    calls.length = 0;
    const text = '{"jsonrpc":"2.0","id":1,"method":"test.mutate"}';
    const send = async (): Promise<Resp> =>
      JSON.parse((await dispatcher.handleText(text, 'test'))!.toString()) as Resp;
    expect((await send()).result).toEqual({ done: true });
    state.draining = true;
    expect((await send()).error?.data?.code).toBe('DRAINING');
    state.draining = false;
    state.ready = false;
    expect((await send()).error?.data?.code).toBe('UNAVAILABLE');
    state.ready = true;
    expect((await send()).result).toEqual({ done: true });
    expect(calls).toEqual(['mutate', 'mutate']);
  });

  it('params of a repeated request text are validated afresh for each call, never shared', async () => {
    const { dispatcher } = setup();
    const text = '{"jsonrpc":"2.0","id":1,"method":"test.echo","params":{"word":"ab","times":2}}';
    for (let i = 0; i < 3; i++) {
      const r = JSON.parse((await dispatcher.handleText(text, `caller-${i}`))!.toString()) as Resp;
      expect(r.result).toEqual({ word: 'abab', caller: `caller-${i}` });
    }
  });

  it('params are validated before the gate (a bad call is INVALID_PARAMS, not DRAINING)', async () => {
    const { dispatcher, state } = setup();
    state.draining = true;
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 1, method: 'test.mutate', params: { x: 1 } });
    expect(r.error?.data?.code).toBe('INVALID_PARAMS');
  });
});

describe('dispatcher: metrics and logs', () => {
  it('counts calls by method and result code', async () => {
    const { dispatcher, metrics, state } = setup();
    await dispatcher.handle({ jsonrpc: '2.0', id: 1, method: 'test.echo' }, 't');
    await dispatcher.handle({ jsonrpc: '2.0', id: 2, method: 'test.echo' }, 't');
    await dispatcher.handle({ jsonrpc: '2.0', method: 'test.echo' }, 't');
    await dispatcher.handle({ jsonrpc: '2.0', id: 3, method: 'test.echo', params: { word: 1 } }, 't');
    await dispatcher.handle({ jsonrpc: '2.0', id: 4, method: 'test.missing' }, 't');
    await dispatcher.handle({ jsonrpc: '2.0', id: 5, method: 'test.crash' }, 't');
    await dispatcher.handle({ jsonrpc: '2.0', id: 6, method: 'whatever' }, 't');
    await dispatcher.handle({ jsonrpc: '1.0', id: 7, method: 'test.echo' }, 't');
    await dispatcher.handleText('{', 't');
    state.draining = true;
    await dispatcher.handle({ jsonrpc: '2.0', id: 8, method: 'test.mutate' }, 't');

    expect(await counter(metrics, 'test.echo', 'ok')).toBe(3);
    expect(await counter(metrics, 'test.echo', 'INVALID_PARAMS')).toBe(1);
    expect(await counter(metrics, 'test.missing', 'NOT_FOUND')).toBe(1);
    expect(await counter(metrics, 'test.crash', 'INTERNAL')).toBe(1);
    expect(await counter(metrics, 'test.mutate', 'DRAINING')).toBe(1);
    // Unknown and invalid method names are folded into fixed labels (no unbounded label values).
    expect(await counter(metrics, '(unknown)', 'METHOD_NOT_FOUND')).toBe(1);
    expect(await counter(metrics, '(invalid)', 'INVALID_REQUEST')).toBe(1);
    const all = await metrics.rpcRequests.get();
    expect(all.values.some((v) => v.labels.method === 'whatever')).toBe(false);

    const hist = await metrics.rpcDuration.get();
    const echoCount = hist.values.find(
      (v) => v.labels.method === 'test.echo' && v.metricName === 'agentd_rpc_request_duration_seconds_count',
    );
    expect(echoCount?.value).toBe(4);
  });

  it('logs one line per call with method, code and caller: reads at debug, mutations and errors at info', async () => {
    const { dispatcher, logs } = setup();
    await dispatcher.handle({ jsonrpc: '2.0', id: 1, method: 'test.missing' }, 'agentctl');
    await dispatcher.handle({ jsonrpc: '2.0', id: 2, method: 'test.echo' }, 'agentctl');
    await dispatcher.handle({ jsonrpc: '2.0', id: 3, method: 'test.mutate' }, 'agentctl');
    const lines = logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => String(l.msg).startsWith('rpc '));
    expect(lines).toHaveLength(3);
    const INFO = 30;
    const DEBUG = 20;
    expect(lines[0]).toMatchObject({
      rpc: 'test.missing',
      code: 'NOT_FOUND',
      caller: 'agentctl',
      level: INFO,
    });
    expect(lines[1]).toMatchObject({ rpc: 'test.echo', code: 'ok', level: DEBUG });
    // The message says what was called and how it ended: `rpc test.echo answered ok in 0.12 ms`.
    expect(lines[1]?.msg).toBe(`rpc test.echo answered ok in ${String(lines[1]?.durationMs)} ms`);
    expect(lines[0]?.msg).toMatch(/^rpc test\.missing answered NOT_FOUND in [\d.]+ ms$/);
    expect(lines[2]).toMatchObject({ rpc: 'test.mutate', code: 'ok', level: INFO });
  });
});

describe('dispatcher: requests the HTTP endpoint refused', () => {
  it('are counted under (invalid) with their code and logged at info with the reason', async () => {
    const { dispatcher, metrics, logs } = setup();
    dispatcher.refused('PAYLOAD_TOO_LARGE', 'HTTP 413: request body exceeds 1048576 bytes', 'curl/8');
    dispatcher.refused('INVALID_REQUEST', 'HTTP 415: content-type must be application/json, got none', 'c');
    dispatcher.refused('INVALID_REQUEST', 'HTTP 405: /rpc takes POST, not GET', 'c');
    expect(await counter(metrics, '(invalid)', 'PAYLOAD_TOO_LARGE')).toBe(1);
    expect(await counter(metrics, '(invalid)', 'INVALID_REQUEST')).toBe(2);
    const lines = logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => String(l.msg).startsWith('rpc '));
    expect(lines).toEqual([
      expect.objectContaining({
        level: 30,
        rpc: '(invalid)',
        code: 'PAYLOAD_TOO_LARGE',
        caller: 'curl/8',
        reason: 'HTTP 413: request body exceeds 1048576 bytes',
      }),
      expect.objectContaining({
        level: 30,
        code: 'INVALID_REQUEST',
        reason: 'HTTP 415: content-type must be application/json, got none',
      }),
      expect.objectContaining({
        level: 30,
        code: 'INVALID_REQUEST',
        reason: 'HTTP 405: /rpc takes POST, not GET',
      }),
    ]);
  });
});

describe('dispatcher: limits', () => {
  it(`a batch of more than ${MAX_BATCH_CALLS} calls is refused whole with BATCH_TOO_LARGE naming the limit; none runs`, async () => {
    const { dispatcher } = setup();
    calls.length = 0;
    const members = Array.from({ length: MAX_BATCH_CALLS + 1 }, (_, i) => ({
      jsonrpc: '2.0',
      id: i,
      method: i === 0 ? 'test.mutate' : 'test.echo',
    }));
    const r = await one(dispatcher, members);
    expect(r.id).toBeNull();
    expect(r.error).toMatchObject({ code: 1022, data: { code: 'BATCH_TOO_LARGE', limit: MAX_BATCH_CALLS } });
    expect(r.error?.message).toContain(String(MAX_BATCH_CALLS));
    expect(calls).toEqual([]);
    // At the limit it runs.
    expect(await many(dispatcher, members.slice(1))).toHaveLength(MAX_BATCH_CALLS);
  });

  it('a read whose answer would pass the answer limit gets RESPONSE_TOO_LARGE naming it', async () => {
    const { dispatcher } = setup();
    const word = 'x'.repeat(64 * 1024);
    const times = Math.ceil(MAX_ANSWER_BYTES / word.length) + 1;
    const r = await one(dispatcher, { jsonrpc: '2.0', id: 1, method: 'test.echo', params: { word, times } });
    expect(r.id).toBe(1);
    expect(r.error).toMatchObject({
      code: 1023,
      data: { code: 'RESPONSE_TOO_LARGE', limit: MAX_ANSWER_BYTES },
    });
    expect(r.error?.message).toContain(String(MAX_ANSWER_BYTES));
  });

  it('in a batch, reads past the answer limit get RESPONSE_TOO_LARGE; earlier answers and mutations are kept', async () => {
    const { dispatcher } = setup();
    calls.length = 0;
    const word = 'y'.repeat(1024 * 1024);
    const big = (id: number) => ({ jsonrpc: '2.0', id, method: 'test.echo', params: { word } });
    const batch = [big(1), big(2), big(3), { jsonrpc: '2.0', id: 4, method: 'test.mutate' }, big(5), big(6)];
    const text = (await dispatcher.handleText(JSON.stringify(batch), 'test'))!.toString();
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_ANSWER_BYTES);
    const r = JSON.parse(text) as Resp[];
    expect(r.map((x) => x.id)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(r.slice(0, 3).every((x) => (x.result as { word: string }).word === word)).toBe(true);
    expect(r[3]!.result).toEqual({ done: true });
    expect(calls).toEqual(['mutate']);
    expect(r[4]!.error?.data?.code).toBe('RESPONSE_TOO_LARGE');
    expect(r[5]!.error?.data?.code).toBe('RESPONSE_TOO_LARGE');
  });
});

describe('versioned reads (methods with a version)', () => {
  function versionedSetup() {
    let version = 1;
    let computed = 0;
    const polled = defineMethod({
      name: 'polled',
      summary: 'a polled read',
      description: 'serialized once per version',
      mutating: false,
      errors: [],
      params: z.strictObject({}),
      result: z.object({ n: z.number() }),
      version: () => version,
      handler: async () => ({ n: ++computed }),
    });
    const metrics = createMetrics({ version: 'test', collectDefaults: false });
    const dispatcher = createDispatcher({
      methods: [polled] as unknown as readonly MethodDescriptor[],
      services: {
        ...NO_PORTS,
        daemonInfo: () => ({ version: 'test', pid: 1, startedAt: '2026-01-01T00:00:00Z', state: 'ready' }),
        watcherStatus: () => null,
        statusVersion: new StatusVersion(),
        openrpc: () => ({}),
      },
      metrics,
      logger: pino({ level: 'silent' }),
      isDraining: () => false,
      isReady: () => true,
    });
    const call = async (body: unknown): Promise<Resp> => (await dispatcher.handle(body, 'test')) as Resp;
    const wire = (raw: string) => dispatcher.handleText(raw, 'test');
    return { call, wire, metrics, bump: () => (version += 1), computed: () => computed };
  }

  it('computes once per version and answers the same result, with each id, while it holds', async () => {
    const h = versionedSetup();
    expect(await h.call({ jsonrpc: '2.0', id: 1, method: 'polled' })).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: { n: 1 },
    });
    expect((await h.call({ jsonrpc: '2.0', id: 'x', method: 'polled', params: {} })).result).toEqual({
      n: 1,
    });
    expect(h.computed()).toBe(1);
    h.bump();
    expect((await h.call({ jsonrpc: '2.0', id: 3, method: 'polled' })).result).toEqual({ n: 2 });
    expect(h.computed()).toBe(2);
    expect(await counter(h.metrics, 'polled', 'ok')).toBe(3);
  });

  it('answers a current version synchronously, on the wire, with the request id', async () => {
    const h = versionedSetup();
    await h.wire('{"jsonrpc":"2.0","id":1,"method":"polled"}');
    const again = h.wire('{"jsonrpc":"2.0","id":"b","method":"polled"}');
    expect(typeof again).toBe('string');
    expect(JSON.parse(again as string)).toEqual({ jsonrpc: '2.0', id: 'b', result: { n: 1 } });
    h.bump();
    expect(h.wire('{"jsonrpc":"2.0","id":2,"method":"polled"}')).toBeInstanceOf(Promise);
  });

  it('a repeated poll (the same text) is answered afresh each version, counted each time, with its own id', async () => {
    const h = versionedSetup();
    const poll = '{"jsonrpc":"2.0","id":7,"method":"polled"}';
    const text = async (raw: string): Promise<Resp> => JSON.parse((await h.wire(raw))!.toString()) as Resp;
    expect(await text(poll)).toEqual({ jsonrpc: '2.0', id: 7, result: { n: 1 } });
    expect(await text(poll)).toEqual({ jsonrpc: '2.0', id: 7, result: { n: 1 } });
    // Another id between two polls with the same id: each answer carries its own.
    expect((await text('{"jsonrpc":"2.0","id":"other","method":"polled"}')).id).toBe('other');
    expect(await text(poll)).toEqual({ jsonrpc: '2.0', id: 7, result: { n: 1 } });
    h.bump();
    expect(await text(poll)).toEqual({ jsonrpc: '2.0', id: 7, result: { n: 2 } });
    expect(h.computed()).toBe(2);
    expect(await counter(h.metrics, 'polled', 'ok')).toBe(5);
  });

  it('a repeated request text is screened and validated every time: errors repeat, nothing is shared', async () => {
    const h = versionedSetup();
    const bad = '{"jsonrpc":"2.0","id":1,"method":"polled","params":{"x":{"y":1}}}';
    for (let i = 0; i < 2; i++) {
      const r = JSON.parse((await h.wire(bad))!.toString()) as Resp;
      expect(r.error?.code).toBe(-32602);
    }
    const unknown = '{"jsonrpc":"2.0","id":1,"method":"nope"}';
    for (let i = 0; i < 2; i++) {
      expect((JSON.parse((await h.wire(unknown))!.toString()) as Resp).error?.code).toBe(-32601);
    }
    expect(await counter(h.metrics, 'polled', 'INVALID_PARAMS')).toBe(2);
    expect(await counter(h.metrics, '(unknown)', 'METHOD_NOT_FOUND')).toBe(2);
  });

  it('never serves the cache for positional params, unknown params or notifications', async () => {
    const h = versionedSetup();
    await h.call({ jsonrpc: '2.0', id: 1, method: 'polled' });
    expect((await h.call({ jsonrpc: '2.0', id: 2, method: 'polled', params: [] })).error?.code).toBe(-32602);
    expect((await h.call({ jsonrpc: '2.0', id: 3, method: 'polled', params: { x: 1 } })).error?.code).toBe(
      -32602,
    );
    expect(await h.call({ jsonrpc: '2.0', method: 'polled' })).toBeNull();
  });
});
