/** Shapes shared by the parts of the fake Kubernetes API server. */

/** A JSON object as it travels over the wire. */
export type Json = Record<string, unknown>;

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  [key: string]: unknown;
}

/** Any stored object: typed metadata, everything else free-form. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec?: Json;
  status?: Json;
  [key: string]: unknown;
}

/** One REST resource the fake serves, with the server behaviours that differ between resources. */
export interface ResourceDef {
  /** Store key, e.g. `machines.unbounded-cloud.io` or `pods`. */
  key: string;
  /** API group; `''` for the core group. */
  group: string;
  version: string;
  /** Plural resource name used in URLs and RBAC. */
  resource: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  /** Writes to the main resource keep the old status; `/status` writes keep everything else. */
  statusSubresource: boolean;
  /** `metadata.generation` bumps when anything but metadata and status changes. */
  trackGeneration: boolean;
  /** Custom resources refuse strategic merge (415) and unconditional PUT (422). */
  custom: boolean;
  /** Field selectors the real server supports for this resource. */
  fieldSelectors: readonly string[];
}

/** One RBAC-like rule of a restricted token. `'*'` matches anything. */
export interface FakeRule {
  verbs: string[];
  /** Resource names with an optional subresource: `machines`, `machines/status`, `pods/eviction`. */
  resources: string[];
  /** API groups (`''` is core); absent: any group (the older, looser rules of these tests). */
  apiGroups?: string[];
  /**
   * Object names, as RBAC's resourceNames: a request matches only when it names one of them
   * (a list or watch names one through `fieldSelector=metadata.name=<name>`; a create never does).
   */
  resourceNames?: string[];
  /** The namespace a Role's rule applies in; absent: a ClusterRole's rule, every namespace. */
  namespace?: string;
}

/** What a token may do: everything (`'admin'`) or only what its rules allow. */
export type FakeRole = 'admin' | { user?: string; rules: FakeRule[] };

/** The request attributes the real API server derives from a URL (its `RequestInfo`). */
export interface RequestInfo {
  method: string;
  path: string;
  query: URLSearchParams;
  group: string;
  version: string;
  resource: string;
  subresource: string | undefined;
  namespace: string | undefined;
  name: string | undefined;
  /** Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection. */
  verb: string;
}

/** What the fake logs for every request it answered. */
export interface RequestRecord {
  method: string;
  path: string;
  query: string;
  verb: string;
  /** `resource` or `resource/subresource`. */
  resource: string;
  name: string | undefined;
  contentType: string | undefined;
  body: unknown;
  /** The HTTP status answered (200 for watches, even those that end in an ERROR event). */
  status: number;
  /** The authenticated user (its token's), once authenticated. */
  user?: string;
}

/**
 * Selects requests for fault injection and counting: either a predicate or a set of fields that
 * must all match (`path` as a string must be equal, as a RegExp must match).
 */
export type RequestMatcher =
  | ((request: RequestInfo) => boolean)
  | { method?: string; path?: string | RegExp; verb?: string; resource?: string };

export function matchRequest(matcher: RequestMatcher | undefined, request: RequestInfo): boolean {
  if (matcher === undefined) return true;
  if (typeof matcher === 'function') return matcher(request);
  const resource = request.subresource ? `${request.resource}/${request.subresource}` : request.resource;
  if (matcher.method !== undefined && matcher.method.toUpperCase() !== request.method) return false;
  if (matcher.verb !== undefined && matcher.verb !== request.verb) return false;
  if (matcher.resource !== undefined && matcher.resource !== resource) return false;
  if (typeof matcher.path === 'string' && matcher.path !== request.path) return false;
  if (matcher.path instanceof RegExp && !matcher.path.test(request.path)) return false;
  return true;
}

export function isPlainObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
