/**
 * Turns what `@kubernetes/client-node` throws (an `ApiException` carrying the Status body as
 * text, a watch error with `statusCode`, or a network error) into agentd errors with a message
 * that says what was being done and what the server said.
 */
import { ApiException } from '@kubernetes/client-node';
import type { AgentError } from '../errors.js';
import {
  KubeConflictError,
  KubeUnavailableError,
  NotFoundError,
  describeError,
  toAgentError,
} from '../errors.js';

/** The parts of a `metav1.Status` agentd looks at. */
export interface KubeStatus {
  code: number;
  reason?: string;
  message?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: Array<{ reason?: string; message?: string }>;
  };
}

function parseStatusBody(body: unknown): Partial<KubeStatus> {
  let value: unknown = body;
  if (typeof body === 'string') {
    try {
      value = JSON.parse(body);
    } catch {
      return body.trim() === '' ? {} : { message: body.trim().slice(0, 300) };
    }
  }
  if (typeof value !== 'object' || value === null) return {};
  const v = value as Record<string, unknown>;
  const details =
    typeof v.details === 'object' && v.details !== null ? (v.details as KubeStatus['details']) : undefined;
  return {
    ...(typeof v.reason === 'string' ? { reason: v.reason } : {}),
    ...(typeof v.message === 'string' ? { message: v.message } : {}),
    ...(details ? { details } : {}),
  };
}

/** The HTTP status and Status body of a failed API call, or undefined for a non-HTTP failure. */
export function kubeStatusOf(err: unknown): KubeStatus | undefined {
  if (err instanceof ApiException) {
    return { code: err.code, ...parseStatusBody(err.body) };
  }
  // Watch failures before the stream starts carry `statusCode` (see client-node's Watch).
  if (err instanceof Error && typeof (err as { statusCode?: unknown }).statusCode === 'number') {
    return { code: (err as unknown as { statusCode: number }).statusCode };
  }
  return undefined;
}

/** True for a 404 that names an object (as opposed to a resource type the server does not serve). */
export function isObjectNotFound(status: KubeStatus | undefined): boolean {
  return status?.code === 404 && typeof status.details?.name === 'string' && status.details.name !== '';
}

/** A 409 from a stale resourceVersion (not an AlreadyExists from a create). */
export function isConflict(err: unknown): boolean {
  const status = kubeStatusOf(err);
  return status?.code === 409 && status.reason !== 'AlreadyExists';
}

export interface KubeErrorContext {
  /** Set for Machine calls: a 404 without object details then means the CRD is missing. */
  crdGroup?: string;
  /** The object the call was about, for NotFound errors (e.g. `Machine worker-01`). */
  object?: string;
}

/**
 * Wrap any failure of a Kubernetes call. `what` says what was being done, e.g.
 * `patch Machine worker-01 status`; the server's own message follows.
 */
export function toKubeError(err: unknown, what: string, context: KubeErrorContext = {}): AgentError {
  const status = kubeStatusOf(err);
  if (status === undefined) {
    return toAgentError(err, what, {
      otherwise: (_message, cause) =>
        new KubeUnavailableError(`${what}: cannot reach the Kubernetes API server: ${describeError(cause)}`, {
          cause,
          data: { reason: 'Unreachable' },
        }),
    });
  }
  const server = status.message ? `: ${status.message}` : '';
  const data = { status: status.code, ...(status.reason ? { kubeReason: status.reason } : {}) };
  switch (status.code) {
    case 401:
      return new KubeUnavailableError(
        `${what}: unauthorized: the API server rejected agentd's credentials (bootstrap token, kubeconfig or service account)`,
        { cause: err, data: { ...data, reason: 'Unauthorized' } },
      );
    case 403:
      return new KubeUnavailableError(
        `${what}: forbidden: needs RBAC permission (see deploy/rbac.yaml)${server}`,
        {
          cause: err,
          data: { ...data, reason: 'Forbidden' },
        },
      );
    case 404:
      if (context.crdGroup !== undefined && !isObjectNotFound(status)) {
        return new KubeUnavailableError(
          `${what}: CRD machines.${context.crdGroup} is not installed (the API server does not serve ${context.crdGroup}/v1alpha3 machines; apply deploy/machine-crd.yaml or set --crd-group)`,
          { cause: err, data: { ...data, reason: 'CrdMissing', group: context.crdGroup } },
        );
      }
      return new NotFoundError(context.object ?? what, { cause: err, data: { ...data, reason: 'NotFound' } });
    case 409:
      return new KubeConflictError(`${what}: conflict${server}`, {
        cause: err,
        data: { ...data, reason: status.reason ?? 'Conflict' },
      });
    default:
      return new KubeUnavailableError(`${what}: the API server answered ${status.code}${server}`, {
        cause: err,
        data: { ...data, reason: status.reason ?? (status.code >= 500 ? 'ServerError' : 'Refused') },
      });
  }
}
