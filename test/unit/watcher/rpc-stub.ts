/**
 * Test helpers for the watcher: a scripted stand-in for the daemon's API (what the watcher
 * calls through its rpc client) and a silent logger.
 */
import pino from 'pino';
import { RpcError } from '../../../src/rpc/client.js';
import type { RpcClient } from '../../../src/rpc/client.js';

export const silentLogger = pino({ level: 'silent' });

/** An operation as the API returns it. */
export interface StubOp {
  id: string;
  kind: 'update';
  state: string;
  reason: string | null;
  requestedBy: string;
  idempotencyKey: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  from: 'kube1' | 'kube2' | null;
  to: 'kube1' | 'kube2' | null;
  phases: [];
  result: Record<string, unknown> | null;
  error: { code: string; message: string } | null;
}

export function stubOp(overrides: Partial<StubOp> = {}): StubOp {
  return {
    id: 'op-1',
    kind: 'update',
    state: 'succeeded',
    reason: null,
    requestedBy: 'watcher',
    idempotencyKey: null,
    createdAt: new Date(Date.UTC(2026, 0, 1)).toISOString(),
    startedAt: null,
    finishedAt: null,
    from: 'kube1',
    to: 'kube2',
    phases: [],
    result: { changed: true },
    error: null,
    ...overrides,
  };
}

/** The applied config the stub's `config.get` answers (only the fields the watcher reads). */
export interface StubApplied {
  version: string;
  image: string;
  labels?: Record<string, string>;
  taints?: string[];
}

export interface StubApi {
  client: RpcClient;
  /** Every call made, in order. */
  calls: Array<{ method: string; params: Record<string, unknown> }>;
  updates(): Array<Record<string, unknown>>;
  /** The applied config, or null for a node that has not joined (`config.get` → NOT_FOUND). */
  applied: StubApplied | null;
  /** What `status` reports as running; `update` with another key is refused BUSY meanwhile. */
  running: StubOp | null;
  /** The operations `update` answered, oldest first (`operations.list` answers them newest first). */
  answered: StubOp[];
  /**
   * How `update` answers: an RpcError to refuse it, or the operation it ends as (at once, or a
   * promise of it). Default: succeeded. Asked with `wait: false`, as the watcher asks, `update`
   * answers the operation running (the promise's as `op-<n>`), and `operations.wait` its end,
   * unless the operation has ended already (`finishedAt` set: a key seen before).
   */
  onUpdate: (params: Record<string, unknown>, n: number) => StubOp | RpcError | Promise<StubOp | RpcError>;
}

export function rpcError(appCode: string, message = `${appCode} from the stub`): RpcError {
  return new RpcError({ code: 1000, message, data: { code: appCode } });
}

export function createStubApi(applied: StubApplied | null = { version: '1.34.0', image: 'img:v1' }): StubApi {
  let updates = 0;
  /** The ends of updates answered while running, by operation id. */
  const pending = new Map<string, Promise<StubOp | RpcError>>();
  const api: StubApi = {
    calls: [],
    applied,
    running: null,
    answered: [],
    onUpdate: (params, n) => stubOp({ id: `op-${n}`, idempotencyKey: String(params.idempotencyKey) }),
    updates: () => api.calls.filter((c) => c.method === 'update').map((c) => c.params),
    client: {
      callRaw: () => Promise.reject(new Error('callRaw is not used by the watcher')),
      call: (async (method: string, params?: Record<string, unknown>) => {
        api.calls.push({ method, params: params ?? {} });
        switch (method) {
          case 'config.get': {
            const a = api.applied;
            if (a === null) throw rpcError('NOT_FOUND', 'no applied config: the node has not joined yet');
            return {
              machine: 'kube1',
              hash: 'h',
              verified: true,
              config: {
                Cluster: { Version: a.version },
                OCIImage: a.image,
                Kubelet: { Labels: a.labels ?? {}, RegisterWithTaints: a.taints ?? [] },
              },
            };
          }
          case 'status': {
            const a = api.applied;
            return {
              operation: api.running,
              node: {
                activeMachine: a === null ? null : 'kube1',
                applied: a === null ? null : { kubernetesVersion: a.version, image: a.image, hash: 'h' },
              },
            };
          }
          case 'operations.list':
            return { operations: [...api.answered].reverse() };
          case 'operations.wait': {
            const ending = pending.get(String(params?.id));
            if (ending === undefined) return api.running;
            pending.delete(String(params?.id));
            const answer = await ending;
            if (answer instanceof RpcError) throw answer;
            return answer;
          }
          case 'update': {
            updates += 1;
            const key = String(params?.idempotencyKey);
            // Another operation runs: refused, as the engine refuses (its own key is a replay).
            const running = api.running;
            if (running !== null && running.idempotencyKey !== key)
              throw rpcError('BUSY', `operation ${running.id} (${running.kind}) is running`);
            const answer = api.onUpdate(params ?? {}, updates);
            // A refusal comes at once, as the engine's admission refuses.
            if (answer instanceof RpcError) throw answer;
            if (params?.wait === true || (!(answer instanceof Promise) && answer.finishedAt !== null)) {
              // Waited for, or an operation that has ended (a key seen before).
              const op = await answer;
              if (op instanceof RpcError) throw op;
              api.answered.push(op);
              return op;
            }
            // Launched: running until `operations.wait` gives its end.
            const id = answer instanceof Promise ? `op-${updates}` : answer.id;
            pending.set(
              id,
              Promise.resolve(answer).then((op) => {
                if (!(op instanceof RpcError)) api.answered.push(op);
                return op;
              }),
            );
            return stubOp({ id, state: 'running', idempotencyKey: key });
          }
          default:
            throw rpcError('METHOD_NOT_FOUND');
        }
      }) as RpcClient['call'],
    },
  };
  return api;
}
