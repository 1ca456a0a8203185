/**
 * The API server as the event recorder's sink (src/kube/event-recorder.ts): `events.k8s.io/v1`
 * Events created, and their series merge-patched, through the generic object client, so they pass
 * the same rate limit and connection pool as every other request.
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { isObjectNotFound, kubeStatusOf, toKubeError } from './api-errors.js';
import type { EventSink } from './event-recorder.js';

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
