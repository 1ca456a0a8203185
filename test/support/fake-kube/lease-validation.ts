/**
 * What the real API server's validation of coordination.k8s.io/v1 Leases and v1 ConfigMaps
 * rejects among the fields agentd writes: MicroTime must be RFC 3339 with microseconds, the
 * duration positive, ConfigMap data string to string. A write that breaks these gets 422 Invalid.
 */
import type { Validator } from './crud.js';
import { isPlainObject } from './types.js';

const MICRO_TIME_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$/;

export const validateLease: Validator = (obj) => {
  const causes: Array<{ field: string; message: string }> = [];
  const spec: unknown = obj.spec ?? {};
  if (!isPlainObject(spec)) return [{ field: 'spec', message: 'must be an object' }];
  for (const f of ['acquireTime', 'renewTime'] as const) {
    const v = spec[f];
    if (v !== undefined && v !== null && (typeof v !== 'string' || !MICRO_TIME_RE.test(v)))
      causes.push({
        field: `spec.${f}`,
        message: `Invalid value: ${JSON.stringify(v)}: must be a MicroTime`,
      });
  }
  const d = spec.leaseDurationSeconds;
  if (d !== undefined && d !== null && !(typeof d === 'number' && Number.isInteger(d) && d > 0))
    causes.push({ field: 'spec.leaseDurationSeconds', message: 'must be greater than 0' });
  const h = spec.holderIdentity;
  if (h !== undefined && h !== null && typeof h !== 'string')
    causes.push({ field: 'spec.holderIdentity', message: 'must be a string' });
  return causes;
};

export const validateConfigMap: Validator = (obj) => {
  const data: unknown = (obj as { data?: unknown }).data;
  if (data === undefined || data === null) return [];
  if (!isPlainObject(data) || Object.values(data).some((v) => typeof v !== 'string'))
    return [{ field: 'data', message: 'must map keys to strings' }];
  return [];
};
