/**
 * What the two watcher benches share (bench/watcher.ts on the fake API server,
 * bench/kube-watch.ts on the real control plane): the p99 of a sample, a poll on the event loop,
 * and the stand-in engine behind the dispatcher (its ports), which records when `update` is called.
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
    status: async () => ({ node: {}, operation: null, lastOperation: null }),
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
