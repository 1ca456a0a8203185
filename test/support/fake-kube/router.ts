/** Maps a parsed request to the resource it names and the handler for its verb. */
import type { ServerResponse } from 'node:http';
import type { Crud } from './crud.js';
import { deletePod, evictPod } from './eviction.js';
import type { EvictionOptions } from './eviction.js';
import {
  CONFIGMAPS,
  LEASES,
  MACHINE_GROUPS,
  MACHINE_VERSION,
  machineDef,
  NODES,
  PDBS,
  PODS,
} from './resources.js';
import type { MachineGroup } from './resources.js';
import { methodNotAllowed, resourceNotFound } from './status.js';
import type { ObjectStore } from './store.js';
import type { Json, KubeObject, RequestInfo, ResourceDef } from './types.js';
import type { WatchHub } from './watch-hub.js';

export interface RouterContext {
  store: ObjectStore;
  crud: Crud;
  hub: WatchHub;
  /** Machine groups whose CRD is "installed"; the others answer 404 for the whole group. */
  installedGroups: Set<MachineGroup>;
  eviction: EvictionOptions;
}

const SUBRESOURCES: Record<string, readonly string[]> = {
  machines: ['status'],
  nodes: ['status'],
  pods: ['status', 'eviction'],
  poddisruptionbudgets: ['status'],
};

function isMachineGroup(group: string): group is MachineGroup {
  return (MACHINE_GROUPS as readonly string[]).includes(group);
}

/** The resource a request names, or 404 exactly where the real server has no such path. */
export function resolveDef(ctx: RouterContext, info: RequestInfo): ResourceDef {
  let def: ResourceDef | undefined;
  if (isMachineGroup(info.group) && info.version === MACHINE_VERSION && info.resource === 'machines') {
    if (ctx.installedGroups.has(info.group)) def = machineDef(info.group);
  } else if (info.group === '' && info.version === 'v1') {
    def = ({ nodes: NODES, pods: PODS, configmaps: CONFIGMAPS } as Record<string, ResourceDef>)[
      info.resource
    ];
  } else if (info.group === 'coordination.k8s.io' && info.version === 'v1' && info.resource === 'leases') {
    def = LEASES;
  } else if (info.group === 'policy' && info.version === 'v1' && info.resource === 'poddisruptionbudgets') {
    def = PDBS;
  }
  if (def === undefined) throw resourceNotFound();
  if (!def.namespaced && info.namespace !== undefined) throw resourceNotFound();
  if (info.subresource !== undefined && !(SUBRESOURCES[def.resource] ?? []).includes(info.subresource)) {
    throw resourceNotFound();
  }
  return def;
}

/** What a handled request answers; `streamed` when a watch took over the response. */
export type RouteResult = { status: number; body: Json | KubeObject } | 'streamed';

export function dispatch(
  ctx: RouterContext,
  info: RequestInfo,
  body: unknown,
  contentType: string | undefined,
  res: ServerResponse,
): RouteResult {
  const def = resolveDef(ctx, info);
  const { namespace: ns, name, subresource: sub } = info;
  if (sub === 'eviction') {
    if (info.verb !== 'create' || name === undefined || ns === undefined) throw methodNotAllowed(info.method);
    return { status: 201, body: evictPod(ctx.store, ns, name, body, ctx.eviction) };
  }
  switch (info.verb) {
    case 'get':
      return { status: 200, body: ctx.crud.get(def, ns, name ?? '') };
    case 'list':
      return { status: 200, body: ctx.crud.list(def, ns, info.query) };
    case 'watch':
      ctx.hub.serve(res, def, ns, info.query);
      return 'streamed';
    case 'create':
      if (name !== undefined) throw methodNotAllowed(info.method);
      return { status: 201, body: ctx.crud.create(def, ns, body) };
    case 'update':
      return { status: 200, body: ctx.crud.update(def, ns, name ?? '', body, sub) };
    case 'patch':
      return { status: 200, body: ctx.crud.patch(def, ns, name ?? '', body, contentType, sub) };
    case 'delete': {
      if (sub !== undefined || name === undefined) throw methodNotAllowed(info.method);
      if (def === PODS) {
        // Pods terminate gracefully: the answer is the pod, possibly still terminating.
        const pod = ctx.crud.get(def, ns, name);
        deletePod(ctx.store, pod, ctx.eviction);
        return { status: 200, body: ctx.store.get(def.key, ns, name) ?? pod };
      }
      return { status: 200, body: ctx.crud.delete(def, ns, name) };
    }
    default:
      throw methodNotAllowed(info.method);
  }
}
