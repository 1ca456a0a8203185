/**
 * What the watcher benches share: the p99 of a sample (bench/watcher.ts and bench/kube-watch.ts),
 * and for bench/watcher.ts (in one process, on the fake API server) a poll on the event loop and
 * the stand-in engine's ports behind the dispatcher, which record when `update` is called.
 */
import type { DrainPort, OperationsPort, StatusReader } from '../../src/rpc/ports.js';
import type { RpcServices } from '../../src/rpc/services.js';

export function p99(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)] ?? Number.NaN;
}

export function waitFor(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const poll = (): void => {
      if (check()) resolve();
      else if (performance.now() > deadline) reject(new Error(`timed out waiting for ${what}`));
      else setImmediate(poll);
    };
    poll();
  });
}

/**
 * The stand-in engine's ports: the applied config matches the Machine; `update` records its
 * start. Only what the watcher calls is there.
 */
export function benchPorts(onUpdate: () => void): Pick<RpcServices, 'status' | 'operations' | 'drain'> {
  let n = 0;
  const now = (): string => new Date().toISOString();
  const status = {
    status: async () => ({
      node: { activeMachine: 'kube1', applied: { kubernetesVersion: '1.34.0', image: 'img:v1', hash: 'h' } },
      operation: null,
      lastOperation: null,
    }),
    appliedConfig: async () => ({
      machine: 'kube1',
      hash: 'h',
      verified: true,
      config: {
        Cluster: { Version: '1.34.0' },
        OCIImage: 'img:v1',
        Kubelet: { Labels: {}, RegisterWithTaints: [] },
      },
    }),
  };
  const operations = {
    // What runs, as the watcher writes it with every status write: nothing ran before.
    listOperations: () => [],
    update: async (req: { idempotencyKey?: string; requestedBy: string }) => {
      onUpdate();
      n += 1;
      return {
        id: `op-${n}`,
        kind: 'update',
        state: 'succeeded',
        reason: null,
        requestedBy: req.requestedBy,
        idempotencyKey: req.idempotencyKey ?? null,
        createdAt: now(),
        startedAt: now(),
        finishedAt: now(),
        from: 'kube1',
        to: 'kube2',
        phases: [],
        result: { changed: true },
        error: null,
      };
    },
  };
  return {
    status: status as unknown as StatusReader,
    operations: operations as unknown as OperationsPort,
    drain: {} as DrainPort,
  };
}
