/**
 * The fake's etcd: objects by resource, one global resourceVersion counter bumped on every write,
 * and a bounded history of events that watches replay from (older versions answer 410).
 */

import type { KubeObject } from './types.js';

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoredEvent {
  /** The resourceVersion the write produced. */
  rv: number;
  /** Store key of the resource (`ResourceDef.key`). */
  resource: string;
  type: EventType;
  object: KubeObject;
}

function objectKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

export class ObjectStore {
  // Start well above 0: "0" means "any version" to the API, so no real object may carry it.
  private rv = 100;
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private history: StoredEvent[] = [];
  /** Watches from a version below this cannot be served: events after it were dropped. */
  private compactedRv = 0;
  private readonly listeners = new Set<(event: StoredEvent) => void>();

  constructor(private readonly historyLimit: number) {}

  get currentRv(): number {
    return this.rv;
  }

  /** The oldest resourceVersion a watch may still start from. */
  get oldestWatchableRv(): number {
    return this.compactedRv;
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.objects.get(resource)?.get(objectKey(namespace, name));
    return obj === undefined ? undefined : structuredClone(obj);
  }

  /** Objects of a resource (in one namespace when given), ordered by namespace and name. */
  list(resource: string, namespace?: string): KubeObject[] {
    const all = [...(this.objects.get(resource)?.values() ?? [])];
    return all
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .sort((a, b) =>
        objectKey(a.metadata.namespace, a.metadata.name).localeCompare(
          objectKey(b.metadata.namespace, b.metadata.name),
        ),
      )
      .map((o) => structuredClone(o));
  }

  /** Store `obj` (created or replaced) under a new resourceVersion and publish the event. */
  write(resource: string, obj: KubeObject, type: 'ADDED' | 'MODIFIED'): KubeObject {
    this.rv += 1;
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(this.rv);
    let byName = this.objects.get(resource);
    if (byName === undefined) {
      byName = new Map();
      this.objects.set(resource, byName);
    }
    byName.set(objectKey(stored.metadata.namespace, stored.metadata.name), stored);
    this.record({ rv: this.rv, resource, type, object: stored });
    return structuredClone(stored);
  }

  /** Remove an object; the DELETED event carries its last state under a new resourceVersion. */
  remove(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const byName = this.objects.get(resource);
    const key = objectKey(namespace, name);
    const obj = byName?.get(key);
    if (byName === undefined || obj === undefined) return undefined;
    byName.delete(key);
    this.rv += 1;
    obj.metadata.resourceVersion = String(this.rv);
    this.record({ rv: this.rv, resource, type: 'DELETED', object: obj });
    return structuredClone(obj);
  }

  /** Events after `rv` (exclusive), oldest first. */
  eventsSince(rv: number, resource: string): StoredEvent[] {
    return this.history.filter((e) => e.rv > rv && e.resource === resource);
  }

  /** Drop the whole history: every watch from an older version now gets 410 Gone. */
  compact(): void {
    this.history = [];
    this.compactedRv = this.rv;
  }

  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private record(event: StoredEvent): void {
    this.history.push(event);
    while (this.history.length > this.historyLimit) {
      const dropped = this.history.shift();
      if (dropped) this.compactedRv = dropped.rv;
    }
    for (const listener of this.listeners) listener(event);
  }
}
