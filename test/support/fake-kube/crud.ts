/**
 * Generic get/list/create/update/patch/delete over the store, with the API server's rules:
 * optimistic concurrency on `metadata.resourceVersion`, the status subresource split,
 * `metadata.generation`, no-op writes that do not bump the resourceVersion, and the patch types
 * each kind of resource accepts.
 */
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { applyJsonPatch, applyMergePatch } from './patch.js';
import { apiVersionOf } from './resources.js';
import { matchesFields, parseFieldSelector, parseLabelSelector } from './selectors.js';
import { alreadyExists, badRequest, conflict, invalid, notFound, unsupportedMediaType } from './status.js';
import type { ObjectStore } from './store.js';
import { isPlainObject } from './types.js';
import type { Json, KubeObject, ResourceDef } from './types.js';

/** Validation a resource applies on every write (the CRD schema's job on a real cluster). */
export type Validator = (obj: KubeObject) => Array<{ field: string; message: string }>;

/** Kubernetes timestamps are RFC 3339 with second precision. */
export function kubeTimestamp(ms: number = Date.now()): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function asObject(def: ResourceDef, body: unknown): KubeObject {
  if (!isPlainObject(body) || !isPlainObject(body.metadata)) {
    throw badRequest(`the body must be a ${def.kind} object with metadata`);
  }
  return body as KubeObject;
}

/** Everything that counts for `metadata.generation`: all but metadata, status and type info. */
function generationRelevant(obj: KubeObject): Json {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = obj;
  return rest;
}

export class Crud {
  constructor(
    private readonly store: ObjectStore,
    private readonly validators: ReadonlyMap<string, Validator> = new Map(),
  ) {}

  get(def: ResourceDef, namespace: string | undefined, name: string): KubeObject {
    const obj = this.store.get(def.key, namespace, name);
    if (obj === undefined) throw notFound(def, name);
    return obj;
  }

  list(def: ResourceDef, namespace: string | undefined, query: URLSearchParams): Json {
    const fields = parseFieldSelector(query.get('fieldSelector'), def.fieldSelectors);
    const labels = parseLabelSelector(query.get('labelSelector'));
    const items = this.store
      .list(def.key, namespace)
      .filter((o) => matchesFields(o, fields) && labels(o.metadata.labels ?? {}));
    return {
      apiVersion: apiVersionOf(def),
      kind: def.listKind,
      metadata: { resourceVersion: String(this.store.currentRv) },
      items,
    };
  }

  create(def: ResourceDef, namespace: string | undefined, body: unknown): KubeObject {
    const proposed = structuredClone(asObject(def, body));
    const name = proposed.metadata.name;
    if (typeof name !== 'string' || name === '') {
      throw invalid(def, '', [
        { field: 'metadata.name', message: 'Required value: name or generateName is required' },
      ]);
    }
    if (def.namespaced) {
      if (proposed.metadata.namespace !== undefined && proposed.metadata.namespace !== namespace) {
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      proposed.metadata.namespace = namespace;
    }
    if (this.store.get(def.key, namespace, name) !== undefined) throw alreadyExists(def, name);
    // The status subresource means create ignores status (a controller owns it).
    if (def.custom && def.statusSubresource) delete proposed.status;
    proposed.apiVersion = apiVersionOf(def);
    proposed.kind = def.kind;
    proposed.metadata = {
      ...proposed.metadata,
      uid: randomUUID(),
      creationTimestamp: kubeTimestamp(),
      ...(def.trackGeneration ? { generation: 1 } : {}),
    };
    delete proposed.metadata.resourceVersion;
    this.validate(def, proposed);
    return this.store.write(def.key, proposed, 'ADDED');
  }

  /** PUT on the main resource or on `/status`. */
  update(
    def: ResourceDef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    subresource?: string,
  ): KubeObject {
    const proposed = asObject(def, body);
    if (proposed.metadata.name !== undefined && proposed.metadata.name !== name) {
      throw badRequest(
        `the name of the object (${String(proposed.metadata.name)}) does not match the name on the URL (${name})`,
      );
    }
    const current = this.get(def, namespace, name);
    if (proposed.metadata.resourceVersion === undefined && def.custom) {
      throw invalid(def, name, [
        { field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' },
      ]);
    }
    return this.commit(def, current, proposed, subresource);
  }

  /** PATCH: apply the patch to the current object, then write it like an update. */
  patch(
    def: ResourceDef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    contentType: string | undefined,
    subresource?: string,
  ): KubeObject {
    const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
    const current = this.get(def, namespace, name);
    let patched: unknown;
    if (type === 'application/merge-patch+json') patched = applyMergePatch(current, body);
    else if (type === 'application/json-patch+json') patched = applyJsonPatch(current, body);
    else if (type === 'application/strategic-merge-patch+json' && !def.custom) {
      // Close enough for the fields agentd patches (scalars and maps); lists would differ.
      patched = applyMergePatch(current, body);
    } else throw unsupportedMediaType(contentType);
    const proposed = asObject(def, patched);
    if (proposed.metadata.name !== name) throw badRequest('metadata.name cannot be changed by a patch');
    return this.commit(def, current, proposed, subresource);
  }

  delete(def: ResourceDef, namespace: string | undefined, name: string): KubeObject {
    const removed = this.store.remove(def.key, namespace, name);
    if (removed === undefined) throw notFound(def, name);
    return removed;
  }

  private commit(
    def: ResourceDef,
    current: KubeObject,
    proposed: KubeObject,
    subresource?: string,
  ): KubeObject {
    const name = current.metadata.name;
    // Optimistic concurrency: a resourceVersion in the request is a precondition.
    const wanted = proposed.metadata.resourceVersion;
    if (wanted !== undefined && wanted !== current.metadata.resourceVersion) throw conflict(def, name);

    let next: KubeObject;
    if (subresource === 'status') {
      next = structuredClone(current);
      if (proposed.status === undefined) delete next.status;
      else next.status = structuredClone(proposed.status);
    } else {
      next = structuredClone(proposed);
      if (def.statusSubresource) {
        if (current.status === undefined) delete next.status;
        else next.status = structuredClone(current.status);
      }
      const system = {
        name: current.metadata.name,
        namespace: current.metadata.namespace,
        uid: current.metadata.uid,
        creationTimestamp: current.metadata.creationTimestamp,
        generation: current.metadata.generation,
        deletionTimestamp: current.metadata.deletionTimestamp,
      };
      next.metadata = { ...next.metadata };
      for (const [k, v] of Object.entries(system)) {
        if (v === undefined) Reflect.deleteProperty(next.metadata, k);
        else next.metadata[k] = v;
      }
    }
    next.apiVersion = apiVersionOf(def);
    next.kind = def.kind;
    next.metadata.resourceVersion = current.metadata.resourceVersion;
    // A write that changes nothing is not a write: no new resourceVersion, no watch event.
    if (isDeepStrictEqual(next, current)) return current;
    if (def.trackGeneration && !isDeepStrictEqual(generationRelevant(next), generationRelevant(current))) {
      next.metadata.generation = (current.metadata.generation ?? 0) + 1;
    }
    this.validate(def, next);
    return this.store.write(def.key, next, 'MODIFIED');
  }

  private validate(def: ResourceDef, obj: KubeObject): void {
    const causes = this.validators.get(def.key)?.(obj) ?? [];
    if (causes.length > 0) throw invalid(def, obj.metadata.name, causes);
  }
}
