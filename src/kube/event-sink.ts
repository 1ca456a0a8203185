/**
 * The API server as the event recorder's sink (src/kube/event-recorder.ts): `events.k8s.io/v1`
 * Events created, and their series merge-patched, through the generic object client.
 *
 * Event writes (and the reads that complete their references) pass a client-side rate limit of
 * their own, not the one every other request shares: a burst of Events at the end of an update
 * must not take the tokens the watcher's status write needs between its read and its patch
 * (which, against another writer, made that write lose every conflict). They share the
 * connection pool.
 */
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Clock } from '../host/types.js';
import { isObjectNotFound, kubeStatusOf, toKubeError } from './api-errors.js';
import type { KubeClients } from './client.js';
import { makeApiClient } from './connection-pool.js';
import type { EventSink } from './event-recorder.js';
import { createRateLimiter } from './rate-limit.js';

/** The Events' own client-side rate limit: 2 requests per second, bursts of 10. */
export const EVENT_QPS = 2;
export const EVENT_REQUEST_BURST = 10;

/** Clients for the Events' requests: the same credentials and pool, their own rate limit. */
export function createEventClients(
  clients: Pick<KubeClients, 'kc' | 'transport'>,
  clock: Clock,
): { custom: CustomObjectsApi; core: CoreV1Api } {
  const transport = {
    limiter: createRateLimiter({ qps: EVENT_QPS, burst: EVENT_REQUEST_BURST, clock }),
    pool: clients.transport.pool,
  };
  return {
    custom: makeApiClient(clients.kc, transport, CustomObjectsApi),
    core: makeApiClient(clients.kc, transport, CoreV1Api),
  };
}

const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const EVENTS = { group: 'events.k8s.io', version: 'v1', plural: 'events' } as const;

export function createEventSink(custom: CustomObjectsApi): EventSink {
  return {
    async create(event) {
      const { namespace } = event.metadata;
      try {
        await custom.createNamespacedCustomObject({ ...EVENTS, namespace, body: event });
      } catch (err) {
        throw toKubeError(err, `create Event ${namespace}/${event.metadata.name}`);
      }
    },
    async patchSeries(namespace, name, series) {
      try {
        await custom.patchNamespacedCustomObject(
          { ...EVENTS, namespace, name, body: { series } },
          MERGE_PATCH,
        );
        return 'patched';
      } catch (err) {
        if (isObjectNotFound(kubeStatusOf(err))) return 'gone';
        throw toKubeError(err, `patch Event ${namespace}/${name}`);
      }
    },
  };
}
