import { describe, expect, it } from 'vitest';
import { ApiException } from '@kubernetes/client-node';
import { KubeConflictError } from '../../../src/errors.js';
import { isConflict, isObjectNotFound, kubeStatusOf, toKubeError } from '../../../src/kube/api-errors.js';

function apiError(code: number, status?: Record<string, unknown>): ApiException<unknown> {
  return new ApiException(
    code,
    'Unknown API Status Code!',
    status === undefined ? undefined : JSON.stringify(status),
    {},
  );
}

describe('Kubernetes API errors', () => {
  it('reads the Status body the client keeps as text', () => {
    const err = apiError(409, {
      kind: 'Status',
      reason: 'Conflict',
      message: 'modified',
      details: { name: 'w' },
    });
    expect(kubeStatusOf(err)).toEqual({
      code: 409,
      reason: 'Conflict',
      message: 'modified',
      details: { name: 'w' },
    });
    expect(kubeStatusOf(new Error('x'))).toBeUndefined();
    expect(kubeStatusOf(Object.assign(new Error('Gone'), { statusCode: 410 }))).toEqual({ code: 410 });
  });

  it('tells an object 404 from a missing resource type, and a conflict from AlreadyExists', () => {
    expect(
      isObjectNotFound(kubeStatusOf(apiError(404, { reason: 'NotFound', details: { name: 'w' } }))),
    ).toBe(true);
    expect(isObjectNotFound(kubeStatusOf(apiError(404, { reason: 'NotFound', details: {} })))).toBe(false);
    expect(isConflict(apiError(409, { reason: 'Conflict' }))).toBe(true);
    expect(isConflict(apiError(409, { reason: 'AlreadyExists' }))).toBe(false);
  });

  it('maps each failure to a code and a message that says what was being done', () => {
    const cases: Array<[unknown, string, Record<string, unknown>]> = [
      [apiError(401), 'KUBE_UNAVAILABLE', { reason: 'Unauthorized' }],
      [apiError(403, { message: 'User "x" cannot patch' }), 'KUBE_UNAVAILABLE', { reason: 'Forbidden' }],
      [apiError(404, { details: {} }), 'KUBE_UNAVAILABLE', { reason: 'CrdMissing', group: 'g.io' }],
      [apiError(404, { details: { name: 'w' } }), 'NOT_FOUND', { reason: 'NotFound' }],
      [apiError(409, { reason: 'Conflict' }), 'KUBE_CONFLICT', { reason: 'Conflict' }],
      [apiError(503, { reason: 'ServiceUnavailable' }), 'KUBE_UNAVAILABLE', { status: 503 }],
      [new Error('connect ECONNREFUSED'), 'KUBE_UNAVAILABLE', { reason: 'Unreachable' }],
    ];
    for (const [err, code, data] of cases) {
      const mapped = toKubeError(err, 'get Machine w', { crdGroup: 'g.io', object: 'Machine w' });
      expect(mapped).toMatchObject({ code, data });
      expect(mapped.cause).toBe(err);
    }
    expect(toKubeError(apiError(404, {}), 'get Machine w', { crdGroup: 'g.io' }).message).toContain(
      'CRD machines.g.io is not installed',
    );
    expect(toKubeError(apiError(401), 'get Machine w').message).toMatch(/^get Machine w: unauthorized/);
    const own = new KubeConflictError('already mapped');
    expect(toKubeError(own, 'x')).toBe(own);
  });
});
