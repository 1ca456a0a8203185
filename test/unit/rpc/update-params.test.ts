/**
 * Params of `update` (and `preflight`) refused by the dispatcher before the engine's operations
 * port is called
 * (docs/api.md): node labels and taints out of Kubernetes syntax (`set` and `config`), and
 * `dryRun` with an `idempotencyKey`. Each is INVALID_PARAMS naming the field; nothing starts.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { StatusVersion } from '../../../src/engine/status-version.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { createDispatcher } from '../../../src/rpc/dispatcher.js';
import { METHOD_LIST } from '../../../src/rpc/methods/index.js';
import type { DrainPort, OperationsPort, StatusReader } from '../../../src/rpc/ports.js';
import type { RpcServices } from '../../../src/rpc/services.js';
import { makeAgentConfig } from '../../support/agent-config.js';

interface Resp {
  result?: unknown;
  error?: {
    code: number;
    message: string;
    data?: { code?: string; issues?: { path: string; message: string }[] };
  };
}

function setup() {
  const engineCalls: string[] = [];
  const record = (name: string) => async (): Promise<never> => {
    engineCalls.push(name);
    throw new Error(`the engine's ${name} was called`);
  };
  // A stand-in of the one port these methods reach (src/rpc/ports.ts).
  const operations = {
    update: record('update'),
    preflight: record('preflight'),
  } as unknown as OperationsPort;
  const services: RpcServices = {
    status: {} as StatusReader,
    operations,
    drain: {} as DrainPort,
    daemonInfo: () => ({ version: 'test', pid: 1, startedAt: '2026-01-01T00:00:00Z', state: 'ready' }),
    watcherStatus: () => null,
    statusVersion: new StatusVersion(),
    openrpc: () => ({}),
  };
  const dispatcher = createDispatcher({
    methods: METHOD_LIST,
    services,
    metrics: createMetrics({ version: 'test', collectDefaults: false }),
    logger: pino({ level: 'silent' }),
    isDraining: () => false,
    isReady: () => true,
  });
  const call = async (method: string, params: Record<string, unknown>): Promise<Resp> =>
    (await dispatcher.handle({ jsonrpc: '2.0', id: 1, method, params }, 'test')) as Resp;
  return { call, engineCalls };
}

const BAD_SETS: [string, Record<string, unknown>, string, RegExp][] = [
  [
    'a label key with a space',
    { nodeLabels: { 'bad key': 'v' } },
    'set.nodeLabels.bad key',
    /expected a label key/,
  ],
  [
    'a label key name over 63',
    { nodeLabels: { ['k'.repeat(64)]: 'v' } },
    `set.nodeLabels.${'k'.repeat(64)}`,
    /label key/,
  ],
  [
    'a label value starting with -',
    { nodeLabels: { tier: '-x' } },
    'set.nodeLabels.tier',
    /expected a label value.*"-x"/,
  ],
  ['a label value over 63', { nodeLabels: { tier: 'v'.repeat(64) } }, 'set.nodeLabels.tier', /label value/],
  [
    'a taint without effect',
    { registerWithTaints: ['dedicated=gpu'] },
    'set.registerWithTaints.0',
    /NoSchedule, PreferNoSchedule, NoExecute.*"dedicated=gpu"/,
  ],
  [
    'a taint with an unknown effect',
    { registerWithTaints: ['a=b:NoSchedule', 'a=b:Sometimes'] },
    'set.registerWithTaints.1',
    /expected a taint/,
  ],
  [
    'a taint key out of label syntax',
    { registerWithTaints: ['_gpu:NoExecute'] },
    'set.registerWithTaints.0',
    /expected a taint/,
  ],
  [
    'two taints in one string',
    { registerWithTaints: ['a=b:NoSchedule,c=d:NoExecute'] },
    'set.registerWithTaints.0',
    /expected a taint/,
  ],
];

describe('labels and taints are checked at the params level', () => {
  it.each(BAD_SETS)(
    'update set with %s: INVALID_PARAMS naming the field; the engine is not called',
    async (_what, set, path, message) => {
      const { call, engineCalls } = setup();
      for (const method of ['update', 'preflight']) {
        const r = await call(method, { set, ...(method === 'update' ? { wait: true } : {}) });
        expect(r.error?.code, method).toBe(-32602);
        expect(r.error?.data?.code).toBe('INVALID_PARAMS');
        expect(r.error?.message).toContain(`: params.${path}: `);
        expect(r.error?.data?.issues?.[0]?.path).toBe(path);
        expect(r.error?.data?.issues?.[0]?.message).toMatch(message);
      }
      expect(engineCalls).toEqual([]);
    },
  );

  it('a full config with a bad label key or taint is refused the same way', async () => {
    const { call, engineCalls } = setup();
    const config = makeAgentConfig();
    const bad = {
      ...config,
      Kubelet: { ...config.Kubelet, Labels: { 'bad key': 'v' }, RegisterWithTaints: ['x:Never'] },
    };
    const r = await call('update', { config: bad });
    expect(r.error?.code).toBe(-32602);
    expect(r.error?.data?.issues?.map((i) => i.path)).toEqual([
      'config.Kubelet.Labels.bad key',
      'config.Kubelet.RegisterWithTaints.0',
    ]);
    expect(r.error?.data?.issues?.[0]?.message).toMatch(/^invalid key: expected a label key/);
    expect(engineCalls).toEqual([]);
  });

  it('good labels and taints pass the params on to the engine', async () => {
    const { call, engineCalls } = setup();
    const set = {
      nodeLabels: { 'node.kubernetes.io/pool': 'gpu-a', plain: '', ['k'.repeat(63)]: 'v'.repeat(63) },
      registerWithTaints: ['dedicated=gpu:NoSchedule', 'example.com/maint:NoExecute', 'a=:PreferNoSchedule'],
    };
    await call('update', { set });
    await call('preflight', { set });
    expect(engineCalls).toEqual(['update', 'preflight']);
  });
});

describe('dryRun and idempotencyKey', () => {
  it('together are INVALID_PARAMS naming idempotencyKey; the engine is not called', async () => {
    const { call, engineCalls } = setup();
    const r = await call('update', {
      dryRun: true,
      idempotencyKey: 'repave-1',
      set: { kubernetesVersion: '1.35.0' },
    });
    expect(r.error?.code).toBe(-32602);
    expect(r.error?.message).toBe(
      'update: invalid params: params.idempotencyKey: not allowed with dryRun: true (a dry run records no operation for the key to return); drop idempotencyKey or dryRun',
    );
    expect(r.error?.data?.issues?.map((i) => i.path)).toEqual(['idempotencyKey']);
    expect(engineCalls).toEqual([]);
  });

  it('each alone, or the key with dryRun: false, reaches the engine', async () => {
    const { call, engineCalls } = setup();
    await call('update', { dryRun: true });
    await call('update', { idempotencyKey: 'repave-1' });
    await call('update', { dryRun: false, idempotencyKey: 'repave-2' });
    expect(engineCalls).toEqual(['update', 'update', 'update']);
  });
});
