/**
 * The pod eviction subresource (policy/v1 Eviction): refused with 429 while a matching
 * PodDisruptionBudget allows no disruption, otherwise the budget is spent and the pod deleted
 * (after an optional grace delay during which it carries a deletionTimestamp).
 */
import { kubeTimestamp } from './crud.js';
import { PDBS, PODS } from './resources.js';
import { matchesLabelSelector } from './selectors.js';
import { badRequest, disruptionBudgetExceeded, HttpError, notFound, statusObject } from './status.js';
import type { ObjectStore } from './store.js';
import { isPlainObject } from './types.js';
import type { Json, KubeObject } from './types.js';

export interface EvictionOptions {
  /** How long (real ms) an evicted pod stays terminating before it is gone; 0 removes it at once. */
  podDeletionDelayMs: number;
  /** Schedules the delayed removal; the server clears these timers on close. */
  schedule: (ms: number, fn: () => void) => void;
}

function pdbsFor(store: ObjectStore, pod: KubeObject): KubeObject[] {
  return store
    .list(PDBS.key, pod.metadata.namespace)
    .filter((pdb) => matchesLabelSelector(pod.metadata.labels ?? {}, pdb.spec?.selector));
}

/** Remove a pod now, or mark it terminating and remove it after the delay. */
export function deletePod(store: ObjectStore, pod: KubeObject, options: EvictionOptions): void {
  const { namespace, name } = pod.metadata;
  if (options.podDeletionDelayMs <= 0) {
    store.remove(PODS.key, namespace, name);
    return;
  }
  if (pod.metadata.deletionTimestamp === undefined) {
    pod.metadata.deletionTimestamp = kubeTimestamp();
    store.write(PODS.key, pod, 'MODIFIED');
  }
  options.schedule(options.podDeletionDelayMs, () => {
    const still = store.get(PODS.key, namespace, name);
    if (still?.metadata.uid === pod.metadata.uid) store.remove(PODS.key, namespace, name);
  });
}

/** Handle `POST /api/v1/namespaces/<ns>/pods/<name>/eviction`; returns the 201 Status body. */
export function evictPod(
  store: ObjectStore,
  namespace: string,
  name: string,
  body: unknown,
  options: EvictionOptions,
): Json {
  if (!isPlainObject(body)) throw badRequest('the body must be a policy/v1 Eviction');
  const meta = isPlainObject(body.metadata) ? body.metadata : {};
  if (meta.name !== undefined && meta.name !== name) {
    throw badRequest(`name in URL does not match name in Eviction object: ${name} != ${String(meta.name)}`);
  }
  const pod = store.get(PODS.key, namespace, name);
  if (pod === undefined) throw notFound(PODS, name);
  const done = statusObject(201, '', '');
  // A pod already terminating needs no budget: evicting it again succeeds.
  if (pod.metadata.deletionTimestamp !== undefined) return done;

  const pdbs = pdbsFor(store, pod);
  if (pdbs.length > 1) {
    throw new HttpError(
      500,
      statusObject(
        500,
        'InternalError',
        'This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.',
      ),
    );
  }
  const pdb = pdbs[0];
  if (pdb !== undefined) {
    const status = pdb.status ?? {};
    const allowed = typeof status.disruptionsAllowed === 'number' ? status.disruptionsAllowed : 0;
    if (allowed <= 0) {
      const healthy = typeof status.currentHealthy === 'number' ? status.currentHealthy : 0;
      const desired = typeof status.desiredHealthy === 'number' ? status.desiredHealthy : healthy;
      throw disruptionBudgetExceeded(
        pdb.metadata.name,
        `needs ${desired} healthy pods and has ${healthy} currently`,
      );
    }
    // The eviction spends one disruption, as the real eviction handler does.
    pdb.status = { ...status, disruptionsAllowed: allowed - 1 };
    store.write(PDBS.key, pdb, 'MODIFIED');
  }
  deletePod(store, pod, options);
  return done;
}
