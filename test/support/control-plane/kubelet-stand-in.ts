/**
 * THE KUBELET STAND-IN. No kubelet can run on these machines — no cgroup controllers are
 * delegated to the test environment (docs/testing.md, "The real control plane") — so this file
 * plays the kubelet's part for the nodes it is given, through the same API a kubelet uses and
 * nothing else:
 *
 * - it registers each Node and keeps its `Ready` condition fresh (`nodes/status`, a heartbeat
 *   every few seconds, the kubelet version it is told);
 * - it marks every pod bound to one of its nodes Running and Ready (`pods/status`), as a kubelet
 *   does once the containers run;
 * - it finishes deleting pods on its nodes that are terminating (a DELETE with grace period 0,
 *   as the kubelet does once the containers stopped), so evicted pods go away.
 *
 * It runs containers for nothing: a pod is "running" the moment it is bound. It looks every
 * 200 ms (a list of all pods) and posts each Node's status every 5 s, or as told; a test that
 * needs to know it looked calls `pass()`. It counts its requests (`requests()`), so that a bench
 * reading kube-apiserver's metrics can tell them from agentd's.
 */
import { requestKind, type ApiClient, type KubeJson } from './api.js';

export interface StandInNode {
  /** `status.nodeInfo.kubeletVersion` (default `v1.34.0`). */
  kubeletVersion?: string;
  labels?: Record<string, string>;
  /** Create the Node cordoned (as an operator's earlier `kubectl cordon`). */
  unschedulable?: boolean;
}

export interface KubeletStandIn {
  /** Register a Node (created if missing) and keep it Ready. */
  addNode(name: string, o?: StandInNode): Promise<void>;
  /** Report another kubelet version for a node (a kubelet upgraded by an update). */
  setKubeletVersion(name: string, version: string): Promise<void>;
  /** Stop heartbeating and handling pods for a node (its kubelet is gone). */
  dropNode(name: string): void;
  /** Resolves after a whole look at the pods that began after this call. */
  pass(): Promise<void>;
  /** Errors the last look met (a failed status write), for a test that wonders. */
  lastError(): string | null;
  /** Its requests so far, by `VERB resource[/subresource]` (as `apiserver_request_total` counts them). */
  requests(): ReadonlyMap<string, number>;
  stop(): Promise<void>;
}

export interface KubeletStandInOptions {
  /** How often it looks at the pods (default 200 ms). */
  lookMs?: number;
  /** How often it posts a Node's status (default 5 s; a kubelet posts it every 5 min unchanged). */
  heartbeatMs?: number;
}

function readyConditions(now: string): KubeJson[] {
  return ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({
    type,
    status: 'True',
    lastTransitionTime: now,
  }));
}

function podReady(pod: KubeJson): boolean {
  const conditions = (pod.status?.conditions ?? []) as KubeJson[];
  return pod.status?.phase === 'Running' && conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

export function startKubeletStandIn(client: ApiClient, o: KubeletStandInOptions = {}): KubeletStandIn {
  const LOOK_MS = o.lookMs ?? 200;
  const HEARTBEAT_MS = o.heartbeatMs ?? 5_000;
  const counts = new Map<string, number>();
  const count = (method: string, p: string): void => {
    const kind = requestKind(method, p);
    if (kind !== null) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  };
  const api: Pick<ApiClient, 'request' | 'get'> = {
    request: (method, p, ...rest) => {
      count(method, p);
      return client.request(method, p, ...rest);
    },
    get: (p) => {
      count('GET', p);
      return client.get(p);
    },
  };
  const nodes = new Map<string, { kubeletVersion: string; lastBeat: number }>();
  let stopped = false;
  let error: string | null = null;
  let passes = 0;
  const waiters: Array<{ after: number; resolve: () => void }> = [];

  const heartbeat = async (name: string): Promise<void> => {
    const node = nodes.get(name);
    if (!node) return;
    const now = new Date().toISOString();
    await api.request(
      'PATCH',
      `/api/v1/nodes/${name}/status`,
      {
        status: {
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'KubeletReady',
              message: 'the kubelet stand-in of the test control plane',
              lastHeartbeatTime: now,
              lastTransitionTime: now,
            },
          ],
          nodeInfo: { kubeletVersion: node.kubeletVersion },
        },
      },
      'application/merge-patch+json',
    );
    node.lastBeat = Date.now();
  };

  const look = async (): Promise<void> => {
    for (const [name, node] of nodes) {
      if (Date.now() - node.lastBeat >= HEARTBEAT_MS) await heartbeat(name);
    }
    if (nodes.size === 0) return;
    const list = await api.get<{ items: KubeJson[] }>('/api/v1/pods');
    const now = new Date().toISOString();
    await Promise.all(
      list.items
        .filter((pod) => nodes.has(pod.spec?.nodeName as string))
        .map(async (pod) => {
          const ns = pod.metadata.namespace as string;
          const name = pod.metadata.name as string;
          if (pod.metadata.deletionTimestamp) {
            const res = await api.request('DELETE', `/api/v1/namespaces/${ns}/pods/${name}`, {
              gracePeriodSeconds: 0,
              preconditions: { uid: pod.metadata.uid },
            });
            if (![200, 404, 409].includes(res.status)) error = `delete pod ${ns}/${name}: HTTP ${res.status}`;
          } else if (!podReady(pod)) {
            const res = await api.request(
              'PATCH',
              `/api/v1/namespaces/${ns}/pods/${name}/status`,
              { status: { phase: 'Running', startTime: now, conditions: readyConditions(now) } },
              'application/merge-patch+json',
            );
            if (![200, 404, 409].includes(res.status)) error = `pod ${ns}/${name} status: HTTP ${res.status}`;
          }
        }),
    );
  };

  const loop = (async () => {
    while (!stopped) {
      const started = passes;
      try {
        await look();
        error = null;
      } catch (err) {
        // The API server may be down (a test restarts it): try again at the next look.
        error = err instanceof Error ? err.message : String(err);
      }
      passes = started + 1;
      for (const w of waiters.splice(0)) {
        if (passes > w.after) w.resolve();
        else waiters.push(w);
      }
      await new Promise((r) => setTimeout(r, LOOK_MS));
    }
  })();

  return {
    async addNode(name, o = {}) {
      const res = await api.request('POST', '/api/v1/nodes', {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name, labels: { 'kubernetes.io/hostname': name, ...(o.labels ?? {}) } },
        spec: o.unschedulable ? { unschedulable: true } : {},
      });
      if (res.status !== 201 && res.status !== 409)
        throw new Error(`create Node ${name}: HTTP ${res.status}: ${res.text}`);
      nodes.set(name, { kubeletVersion: o.kubeletVersion ?? 'v1.34.0', lastBeat: 0 });
      await heartbeat(name);
    },
    async setKubeletVersion(name, version) {
      const node = nodes.get(name);
      if (!node) throw new Error(`the kubelet stand-in has no node ${name}`);
      node.kubeletVersion = version;
      await heartbeat(name);
    },
    dropNode(name) {
      nodes.delete(name);
    },
    pass() {
      // The look running now may have listed the pods before the caller's change: wait for the next.
      const after = passes + 1;
      return new Promise((resolve) => waiters.push({ after, resolve }));
    },
    lastError: () => error,
    requests: () => counts,
    async stop() {
      stopped = true;
      await loop;
      for (const w of waiters.splice(0)) w.resolve();
    },
  };
}
