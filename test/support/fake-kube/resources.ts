/** The resources the fake serves and how a URL maps to one (the real server's RequestInfo parsing). */
import type { RequestInfo, ResourceDef } from './types.js';

/** Both groups the Machine CRD has lived in. */
export const MACHINE_GROUPS = ['unbounded-cloud.io', 'unbounded-kube.io'] as const;
export type MachineGroup = (typeof MACHINE_GROUPS)[number];
export const MACHINE_VERSION = 'v1alpha3';

const CR_FIELDS = ['metadata.name', 'metadata.namespace'] as const;

export function machineDef(group: MachineGroup): ResourceDef {
  return {
    key: `machines.${group}`,
    group,
    version: MACHINE_VERSION,
    resource: 'machines',
    kind: 'Machine',
    listKind: 'MachineList',
    namespaced: false,
    statusSubresource: true,
    trackGeneration: true,
    custom: true,
    fieldSelectors: CR_FIELDS,
  };
}

export const NODES: ResourceDef = {
  key: 'nodes',
  group: '',
  version: 'v1',
  resource: 'nodes',
  kind: 'Node',
  listKind: 'NodeList',
  namespaced: false,
  statusSubresource: true,
  trackGeneration: false,
  custom: false,
  fieldSelectors: ['metadata.name', 'spec.unschedulable'],
};

export const PODS: ResourceDef = {
  key: 'pods',
  group: '',
  version: 'v1',
  resource: 'pods',
  kind: 'Pod',
  listKind: 'PodList',
  namespaced: true,
  statusSubresource: true,
  trackGeneration: false,
  custom: false,
  fieldSelectors: [
    'metadata.name',
    'metadata.namespace',
    'spec.nodeName',
    'spec.restartPolicy',
    'status.phase',
  ],
};

export const PDBS: ResourceDef = {
  key: 'poddisruptionbudgets.policy',
  group: 'policy',
  version: 'v1',
  resource: 'poddisruptionbudgets',
  kind: 'PodDisruptionBudget',
  listKind: 'PodDisruptionBudgetList',
  namespaced: true,
  statusSubresource: true,
  trackGeneration: true,
  custom: false,
  fieldSelectors: CR_FIELDS,
};

export const CONFIGMAPS: ResourceDef = {
  key: 'configmaps',
  group: '',
  version: 'v1',
  resource: 'configmaps',
  kind: 'ConfigMap',
  listKind: 'ConfigMapList',
  namespaced: true,
  statusSubresource: false,
  trackGeneration: false,
  custom: false,
  fieldSelectors: CR_FIELDS,
};

export const LEASES: ResourceDef = {
  key: 'leases.coordination.k8s.io',
  group: 'coordination.k8s.io',
  version: 'v1',
  resource: 'leases',
  kind: 'Lease',
  listKind: 'LeaseList',
  namespaced: true,
  statusSubresource: false,
  trackGeneration: false,
  custom: false,
  fieldSelectors: CR_FIELDS,
};

export function apiVersionOf(def: ResourceDef): string {
  return def.group ? `${def.group}/${def.version}` : def.version;
}

const VERBS: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };

/**
 * Derive the request attributes from the URL alone, before knowing whether the resource exists:
 * the real server authorizes on these, so an unauthorized caller gets 403 even for a missing CRD.
 * Returns undefined for non-resource paths.
 */
export function parseRequestInfo(method: string, url: URL): RequestInfo | undefined {
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  let group: string;
  let version: string | undefined;
  let rest: string[];
  if (parts[0] === 'api') {
    group = '';
    version = parts[1];
    rest = parts.slice(2);
  } else if (parts[0] === 'apis') {
    group = parts[1] ?? '';
    version = parts[2];
    rest = parts.slice(3);
  } else {
    return undefined;
  }
  if (version === undefined || rest.length === 0) return undefined;
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource = '', name, subresource] = rest;
  const watch = ['true', '1'].includes(url.searchParams.get('watch') ?? '');
  let verb: string;
  if (method === 'GET') verb = name === undefined ? (watch ? 'watch' : 'list') : 'get';
  else if (method === 'DELETE' && name === undefined) verb = 'deletecollection';
  else verb = VERBS[method] ?? method.toLowerCase();
  return {
    method,
    path: url.pathname,
    query: url.searchParams,
    group,
    version,
    resource,
    subresource,
    namespace,
    name,
    verb,
  };
}
