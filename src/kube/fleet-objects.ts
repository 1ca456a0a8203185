/**
 * The Kubernetes objects of the fleet gate (docs/fleet.md): coordination.k8s.io/v1 Leases (the
 * slots) and ConfigMaps (the policy and the recorded failures), all in one namespace. Reads are
 * validated with zod; writes carry the resourceVersion read, so a concurrent writer makes them fail
 * with KUBE_CONFLICT (409) instead of being overwritten. A create of an existing name is a
 * KUBE_CONFLICT with `data.kubeReason` `AlreadyExists`.
 */
import { V1MicroTime } from '@kubernetes/client-node';
import type { KubeConfig, CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import * as z from 'zod';
import type { AgentError } from '../errors.js';
import { systemClock } from '../host/clock.js';
import { isObjectNotFound, kubeStatusOf, toKubeError } from './api-errors.js';
import { BARE_TRANSPORT, type KubeTransport } from './connection-pool.js';
import { createReflector, type ReflectorSource, type WatchTarget } from './reflector.js';
import { parseKubeObject } from './schemas.js';

const microTimeSchema = z.union([z.string(), z.date()]).nullish();

const leaseSchema = z.looseObject({
  metadata: z.looseObject({ name: z.string().min(1), resourceVersion: z.string().min(1) }),
  spec: z
    .looseObject({
      holderIdentity: z.string().nullish(),
      leaseDurationSeconds: z.number().int().nullish(),
      acquireTime: microTimeSchema,
      renewTime: microTimeSchema,
      leaseTransitions: z.number().int().nullish(),
    })
    .nullish(),
});

const configMapSchema = z.looseObject({
  metadata: z.looseObject({ name: z.string().min(1), resourceVersion: z.string().min(1) }),
  data: z.record(z.string(), z.string()).nullish(),
});

/** A slot Lease as agentd reads it; times in ms since the epoch. */
export interface LeaseRecord {
  name: string;
  resourceVersion: string;
  holder: string | null;
  durationSeconds: number | null;
  acquireTimeMs: number | null;
  renewTimeMs: number | null;
  transitions: number;
}

/** What agentd writes into a Lease's spec. */
export interface LeaseSpecWrite {
  holder: string | null;
  durationSeconds: number;
  acquireTimeMs: number | null;
  renewTimeMs: number | null;
  transitions: number;
}

export interface ConfigMapRecord {
  name: string;
  resourceVersion: string;
  data: Record<string, string>;
}

/** The label on every slot Lease agentd writes: the waiting agents' list+watch selects on it. */
export const SLOT_LABEL = { key: 'app.kubernetes.io/component', value: 'agentd-fleet-slot' } as const;
const SLOT_SELECTOR = `${SLOT_LABEL.key}=${SLOT_LABEL.value}`;

/** A change of a watched slot Lease. */
export type LeaseWatchEvent =
  { type: 'ADDED' | 'MODIFIED'; lease: LeaseRecord } | { type: 'DELETED'; name: string };

/** A change of a watched ConfigMap (null when it was deleted), or a failure of the watch. */
export type ConfigMapWatchEvent =
  { type: 'ADDED' | 'MODIFIED'; configMap: ConfigMapRecord } | { type: 'DELETED'; resourceVersion: string };

export interface FleetObjects {
  readonly namespace: string;
  getLease(name: string): Promise<LeaseRecord | null>;
  /** The Leases of the namespace, labelled or not (callers pick the slots by name). */
  listLeases(): Promise<LeaseRecord[]>;
  /** The list+watch of the slot Leases (label selector), for a reflector (src/kube/reflector.ts). */
  watchLeases(): ReflectorSource<LeaseRecord>;
  createLease(name: string, spec: LeaseSpecWrite): Promise<LeaseRecord>;
  replaceLease(name: string, resourceVersion: string, spec: LeaseSpecWrite): Promise<LeaseRecord>;
  getConfigMap(name: string): Promise<ConfigMapRecord | null>;
  createConfigMap(name: string, data: Record<string, string>): Promise<ConfigMapRecord>;
  replaceConfigMap(
    name: string,
    resourceVersion: string,
    data: Record<string, string>,
  ): Promise<ConfigMapRecord>;
  /** The list+watch of one ConfigMap (field selector on its name), for a reflector. */
  configMapSource(name: string): ReflectorSource<ConfigMapRecord>;
  /**
   * Follow one ConfigMap until its watch ends, once (no restart: for a caller that looks again
   * itself). `onList` gets the state the watch starts from; `onDone` is called once when the
   * watch ends by itself (null: the server closed it, or it must be listed again), never after
   * the returned function stopped it.
   */
  watchConfigMap(
    name: string,
    onList: (configMap: ConfigMapRecord | null) => void,
    onEvent: (event: ConfigMapWatchEvent) => void,
    onDone: (err: AgentError | null) => void,
  ): Promise<() => void>;
}

function timeMs(v: string | Date | null | undefined): number | null {
  if (v === null || v === undefined) return null;
  const ms = v instanceof Date ? v.getTime() : Date.parse(v);
  return Number.isFinite(ms) ? ms : null;
}

function toLease(value: unknown): LeaseRecord {
  const l = parseKubeObject(leaseSchema, 'Lease', value);
  return {
    name: l.metadata.name,
    resourceVersion: l.metadata.resourceVersion,
    holder: l.spec?.holderIdentity || null,
    durationSeconds: l.spec?.leaseDurationSeconds ?? null,
    acquireTimeMs: timeMs(l.spec?.acquireTime),
    renewTimeMs: timeMs(l.spec?.renewTime),
    transitions: l.spec?.leaseTransitions ?? 0,
  };
}

function toConfigMap(value: unknown): ConfigMapRecord {
  const c = parseKubeObject(configMapSchema, 'ConfigMap', value);
  return { name: c.metadata.name, resourceVersion: c.metadata.resourceVersion, data: c.data ?? {} };
}

function leaseBody(name: string, namespace: string, spec: LeaseSpecWrite, resourceVersion?: string) {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      namespace,
      labels: { [SLOT_LABEL.key]: SLOT_LABEL.value },
      ...(resourceVersion ? { resourceVersion } : {}),
    },
    spec: {
      // An empty holder is a free slot (what client-go's leader election writes on release).
      holderIdentity: spec.holder ?? '',
      leaseDurationSeconds: spec.durationSeconds,
      // MicroTime: client-node's V1MicroTime prints the microseconds the API server expects.
      ...(spec.acquireTimeMs !== null ? { acquireTime: new V1MicroTime(spec.acquireTimeMs) } : {}),
      ...(spec.renewTimeMs !== null ? { renewTime: new V1MicroTime(spec.renewTimeMs) } : {}),
      leaseTransitions: spec.transitions,
    },
  };
}

/** The fleet objects in `namespace`, through the clients built by `createKubeClients`. */
export function createFleetObjects(o: {
  kc: KubeConfig;
  core: CoreV1Api;
  coordination: CoordinationV1Api;
  namespace: string;
  /** The clients' rate limit and connection pool, for the watches (default: none). */
  transport?: KubeTransport;
}): FleetObjects {
  const { core, coordination, namespace } = o;
  const target = (path: string, query: Record<string, string>): WatchTarget => ({
    kc: o.kc,
    transport: o.transport ?? BARE_TRANSPORT,
    path,
    query,
  });
  const configMapSource = (name: string): ReflectorSource<ConfigMapRecord> => {
    const fieldSelector = `metadata.name=${name}`;
    return {
      what: `ConfigMap ${namespace}/${name}`,
      async list() {
        const list = await core.listNamespacedConfigMap({ namespace, fieldSelector });
        return {
          items: list.items,
          resourceVersion: list.metadata?.resourceVersion,
          target: target(`/api/v1/namespaces/${namespace}/configmaps`, { fieldSelector }),
        };
      },
      decode: toConfigMap,
    };
  };
  const notFoundIsNull = async <T>(what: string, fn: () => Promise<T>): Promise<T | null> => {
    try {
      return await fn();
    } catch (err) {
      if (isObjectNotFound(kubeStatusOf(err))) return null;
      throw toKubeError(err, what);
    }
  };
  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw toKubeError(err, what);
    }
  };

  return {
    namespace,
    getLease: async (name) =>
      notFoundIsNull(`get Lease ${namespace}/${name}`, async () =>
        toLease(await coordination.readNamespacedLease({ name, namespace })),
      ),
    // Every Lease of the namespace, not only the labelled ones: a slot an older agentd wrote
    // without the label must still show in fleet status and be seen by a look without the watch.
    listLeases: async () =>
      call(`list Leases in ${namespace}`, async () =>
        (await coordination.listNamespacedLease({ namespace })).items.map(toLease),
      ),
    createLease: async (name, spec) =>
      call(`create Lease ${namespace}/${name}`, async () =>
        toLease(
          await coordination.createNamespacedLease({ namespace, body: leaseBody(name, namespace, spec) }),
        ),
      ),
    replaceLease: async (name, resourceVersion, spec) =>
      call(`update Lease ${namespace}/${name}`, async () =>
        toLease(
          await coordination.replaceNamespacedLease({
            name,
            namespace,
            body: leaseBody(name, namespace, spec, resourceVersion),
          }),
        ),
      ),
    getConfigMap: async (name) =>
      notFoundIsNull(`get ConfigMap ${namespace}/${name}`, async () =>
        toConfigMap(await core.readNamespacedConfigMap({ name, namespace })),
      ),
    createConfigMap: async (name, data) =>
      call(`create ConfigMap ${namespace}/${name}`, async () =>
        toConfigMap(
          await core.createNamespacedConfigMap({
            namespace,
            body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data },
          }),
        ),
      ),
    replaceConfigMap: async (name, resourceVersion, data) =>
      call(`update ConfigMap ${namespace}/${name}`, async () =>
        toConfigMap(
          await core.replaceNamespacedConfigMap({
            name,
            namespace,
            body: {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name, namespace, resourceVersion },
              data,
            },
          }),
        ),
      ),
    configMapSource,
    async watchConfigMap(name, onList, onEvent, onDone) {
      let finished = false;
      const finish = (err: AgentError | null): void => {
        if (finished) return;
        finished = true;
        void reflector.stop();
        onDone(err);
      };
      const reflector = createReflector<ConfigMapRecord>({
        ...configMapSource(name),
        onList: (items) => {
          if (!finished) onList(items[0] ?? null);
        },
        onEvent: (type, cm) => {
          if (finished) return;
          if (type === 'DELETED') onEvent({ type, resourceVersion: cm.resourceVersion });
          else onEvent({ type, configMap: cm });
        },
        // Once: the first end is the caller's, who looks again itself.
        onRestart: () => finish(null),
        giveUp: (err) => {
          finish(err.data.reason === 'WatchClosed' ? null : err);
          return true;
        },
        clock: systemClock,
      });
      void reflector.start();
      return () => {
        finished = true;
        void reflector.stop();
      };
    },
    watchLeases: () => ({
      what: `slot Leases in ${namespace}`,
      async list() {
        const list = await coordination.listNamespacedLease({ namespace, labelSelector: SLOT_SELECTOR });
        return {
          items: list.items,
          resourceVersion: list.metadata?.resourceVersion,
          target: target(`/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`, {
            labelSelector: SLOT_SELECTOR,
          }),
        };
      },
      decode: toLease,
    }),
  };
}

/** True for a create that found the name taken (409 AlreadyExists). */
export function isAlreadyExists(err: unknown): boolean {
  return (err as { data?: { kubeReason?: unknown } } | null)?.data?.kubeReason === 'AlreadyExists';
}

/** True for a write refused because another writer changed the object first (409 Conflict). */
export function isWriteConflict(err: unknown): boolean {
  const e = err as { code?: unknown; data?: { kubeReason?: unknown } } | null;
  return e?.code === 'KUBE_CONFLICT' && e.data?.kubeReason !== 'AlreadyExists';
}
