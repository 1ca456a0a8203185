/** Builders for the objects tests seed: nodes, pods of every kind drain cares about, PDBs. */
import { randomUUID } from 'node:crypto';
import type { Json, KubeObject } from './types.js';

export interface NodeSeed {
  unschedulable?: boolean;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** The `Ready` condition (default `True`); `false` is `False/KubeletNotReady`. */
  ready?: boolean;
  /** `status.nodeInfo.kubeletVersion` (default: not reported). */
  kubeletVersion?: string;
}

/** What a kubelet reports in a Node's status: the `Ready` condition and `nodeInfo`. */
export interface NodeStatusSeed {
  ready: boolean;
  /** Reason and message of the Ready condition (default KubeletReady / KubeletNotReady). */
  reason?: string;
  message?: string;
  /** `status.nodeInfo.kubeletVersion`; undefined leaves it as it is. */
  kubeletVersion?: string;
}

/** The `Ready` condition as a kubelet writes it. */
export function readyCondition(seed: NodeStatusSeed, now = new Date()): Record<string, unknown> {
  return {
    type: 'Ready',
    status: seed.ready ? 'True' : 'False',
    reason: seed.reason ?? (seed.ready ? 'KubeletReady' : 'KubeletNotReady'),
    message:
      seed.message ??
      (seed.ready ? 'kubelet is posting ready status' : 'container runtime network not ready'),
    lastHeartbeatTime: now.toISOString(),
    lastTransitionTime: now.toISOString(),
  };
}

export function makeNode(name: string, seed: NodeSeed = {}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: { 'kubernetes.io/hostname': name, ...seed.labels },
      ...(seed.annotations ? { annotations: seed.annotations } : {}),
    },
    spec: seed.unschedulable ? { unschedulable: true } : {},
    status: {
      conditions: [readyCondition({ ready: seed.ready ?? true })],
      ...(seed.kubeletVersion !== undefined ? { nodeInfo: { kubeletVersion: seed.kubeletVersion } } : {}),
    },
  };
}

/** Who owns a seeded pod: a controller kind (ReplicaSet, DaemonSet, StatefulSet, Job…) or nobody. */
export interface PodOwnerSeed {
  kind: string;
  name: string;
  apiVersion?: string;
  /** Whether the reference is the managing controller (default true). */
  controller?: boolean;
}

export interface PodSeed {
  name: string;
  namespace?: string;
  nodeName: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Default: owned by ReplicaSet `<name>-rs`. `null` makes an unmanaged (bare) pod. */
  owner?: PodOwnerSeed | null;
  /** A static pod's mirror (annotation `kubernetes.io/config.mirror`). */
  mirror?: boolean;
  /** Give the pod an emptyDir volume. */
  emptyDir?: boolean;
  phase?: 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';
}

const OWNER_API: Record<string, string> = {
  ReplicaSet: 'apps/v1',
  DaemonSet: 'apps/v1',
  StatefulSet: 'apps/v1',
  Deployment: 'apps/v1',
  Job: 'batch/v1',
  Node: 'v1',
};

export function makePod(seed: PodSeed): KubeObject {
  const owner = seed.owner === undefined ? { kind: 'ReplicaSet', name: `${seed.name}-rs` } : seed.owner;
  const annotations: Record<string, string> = { ...seed.annotations };
  if (seed.mirror) annotations['kubernetes.io/config.mirror'] = randomUUID().replace(/-/g, '');
  const volumes: Json[] = [{ name: 'kube-api-access', projected: { sources: [] } }];
  if (seed.emptyDir) volumes.push({ name: 'scratch', emptyDir: {} });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: seed.name,
      namespace: seed.namespace ?? 'default',
      labels: seed.labels ?? { app: seed.name },
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      ...(owner === null
        ? {}
        : {
            ownerReferences: [
              {
                apiVersion: owner.apiVersion ?? OWNER_API[owner.kind] ?? 'v1',
                kind: owner.kind,
                name: owner.name,
                uid: randomUUID(),
                controller: owner.controller ?? true,
                blockOwnerDeletion: true,
              },
            ],
          }),
    },
    spec: {
      nodeName: seed.nodeName,
      containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.9' }],
      volumes,
    },
    status: { phase: seed.phase ?? 'Running' },
  };
}

export interface PdbSeed {
  name: string;
  namespace?: string;
  /** `metav1.LabelSelector`; `{}` selects every pod of the namespace. */
  selector: Json;
  disruptionsAllowed: number;
  currentHealthy?: number;
  desiredHealthy?: number;
}

export function makePdb(seed: PdbSeed): KubeObject {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: seed.name, namespace: seed.namespace ?? 'default' },
    spec: { selector: seed.selector, minAvailable: seed.desiredHealthy ?? 1 },
    status: {
      disruptionsAllowed: seed.disruptionsAllowed,
      currentHealthy: seed.currentHealthy ?? 1,
      desiredHealthy: seed.desiredHealthy ?? 1,
      expectedPods: seed.currentHealthy ?? 1,
    },
  };
}
