/**
 * `metav1.Status` bodies with the reasons, codes and message formats of the real API server, and
 * the error that carries one out of a handler.
 */
import type { Json, ResourceDef } from './types.js';

/** Thrown by handlers; the server answers `status` with `body` (a Status object). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: Json,
    /** Extra response headers (an injected fault's `Retry-After`). */
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof body.message === 'string' ? body.message : `HTTP ${status}`);
    this.name = 'HttpError';
  }
}

export function statusObject(code: number, reason: string, message: string, details?: Json): Json {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: code < 400 ? 'Success' : 'Failure',
    message,
    reason,
    ...(details === undefined ? {} : { details }),
    code,
  };
}

function qualified(def: ResourceDef): string {
  return def.group ? `${def.resource}.${def.group}` : def.resource;
}

function details(def: ResourceDef, name: string): Json {
  return { name, group: def.group, kind: def.resource };
}

/** The object is missing (details name it, unlike a missing resource type). */
export function notFound(def: ResourceDef, name: string): HttpError {
  return new HttpError(
    404,
    statusObject(404, 'NotFound', `${qualified(def)} "${name}" not found`, details(def, name)),
  );
}

/** The URL names no served resource (e.g. the CRD is not installed): details are empty. */
export function resourceNotFound(): HttpError {
  return new HttpError(
    404,
    statusObject(404, 'NotFound', 'the server could not find the requested resource', {}),
  );
}

export function conflict(def: ResourceDef, name: string): HttpError {
  return new HttpError(
    409,
    statusObject(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualified(def)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      details(def, name),
    ),
  );
}

export function alreadyExists(def: ResourceDef, name: string): HttpError {
  return new HttpError(
    409,
    statusObject(409, 'AlreadyExists', `${qualified(def)} "${name}" already exists`, details(def, name)),
  );
}

/** 422 with field causes, like admission/validation failures. */
export function invalid(
  def: ResourceDef,
  name: string,
  causes: Array<{ field: string; message: string }>,
): HttpError {
  const text = causes.map((c) => `${c.field}: ${c.message}`).join(', ');
  return new HttpError(
    422,
    statusObject(422, 'Invalid', `${def.kind} "${name}" is invalid: ${text}`, {
      ...details(def, name),
      causes: causes.map((c) => ({ reason: 'FieldValueInvalid', message: c.message, field: c.field })),
    }),
  );
}

export function badRequest(message: string): HttpError {
  return new HttpError(400, statusObject(400, 'BadRequest', message));
}

export function unsupportedMediaType(contentType: string | undefined): HttpError {
  return new HttpError(
    415,
    statusObject(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format (${contentType ?? 'none'}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
    ),
  );
}

export function methodNotAllowed(method: string): HttpError {
  return new HttpError(
    405,
    statusObject(
      405,
      'MethodNotAllowed',
      `the server does not allow this method on the requested resource (${method})`,
    ),
  );
}

export function unauthorized(): HttpError {
  return new HttpError(401, statusObject(401, 'Unauthorized', 'Unauthorized'));
}

export function forbidden(
  user: string,
  verb: string,
  group: string,
  resource: string,
  name?: string,
  ns?: string,
): HttpError {
  const [plural] = resource.split('/');
  const what = group ? `${plural}.${group}` : plural;
  const scope = ns === undefined ? 'at the cluster scope' : `in the namespace "${ns}"`;
  const subject = name === undefined ? `${what} is forbidden` : `${what} "${name}" is forbidden`;
  return new HttpError(
    403,
    statusObject(
      403,
      'Forbidden',
      `${subject}: User "${user}" cannot ${verb} resource "${resource}" in API group "${group}" ${scope}`,
      { ...(name === undefined ? {} : { name }), group, kind: plural },
    ),
  );
}

/** The answer of the eviction subresource while a PodDisruptionBudget forbids the eviction. */
export function disruptionBudgetExceeded(pdbName: string, message: string): HttpError {
  return new HttpError(
    429,
    statusObject(
      429,
      'TooManyRequests',
      "Cannot evict pod as it would violate the pod's disruption budget.",
      {
        causes: [{ reason: 'DisruptionBudget', message: `The disruption budget ${pdbName} ${message}` }],
      },
    ),
  );
}

/** An injected server fault (500 InternalError or 503 ServiceUnavailable). */
export function serverFault(code: number, message: string, retryAfterSeconds?: number): HttpError {
  const reason =
    code === 503
      ? 'ServiceUnavailable'
      : code === 504
        ? 'Timeout'
        : code === 429
          ? 'TooManyRequests'
          : 'InternalError';
  const headers: Record<string, string> =
    retryAfterSeconds === undefined ? {} : { 'retry-after': String(retryAfterSeconds) };
  return new HttpError(code, statusObject(code, reason, message), headers);
}

/** The Status a watch sends as an ERROR event when the requested resourceVersion is compacted. */
export function expiredStatus(requested: string, oldest: number): Json {
  return statusObject(410, 'Expired', `too old resource version: ${requested} (${oldest})`);
}
