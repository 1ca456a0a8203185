/**
 * What the Machine CRD's openAPIV3Schema (deploy/machine-crd.yaml) would reject on a real
 * cluster, for the fields agentd writes: a write that breaks these gets 422 Invalid.
 */
import type { Validator } from './crud.js';
import { isPlainObject } from './types.js';

export const MACHINE_PHASES = ['Pending', 'Rebooting', 'Provisioning', 'Joining', 'Ready', 'Failed'];

function isCounter(value: unknown): boolean {
  return value === undefined || (typeof value === 'number' && Number.isInteger(value) && value >= 0);
}

export const validateMachine: Validator = (obj) => {
  const causes: Array<{ field: string; message: string }> = [];
  const spec = obj.spec ?? {};
  const status = obj.status ?? {};
  if (spec.kubernetes !== undefined) {
    const k = spec.kubernetes;
    if (!isPlainObject(k))
      causes.push({ field: 'spec.kubernetes', message: 'Invalid value: must be an object' });
    else {
      const ref = k.bootstrapTokenRef;
      if (!isPlainObject(ref) || typeof ref.name !== 'string' || ref.name === '') {
        causes.push({ field: 'spec.kubernetes.bootstrapTokenRef', message: 'Required value' });
      }
      if (k.version !== undefined && typeof k.version !== 'string') {
        causes.push({ field: 'spec.kubernetes.version', message: 'Invalid value: must be a string' });
      }
    }
  }
  for (const [path, ops] of [
    ['spec.operations', spec.operations],
    ['status.operations', status.operations],
  ] as const) {
    if (!isPlainObject(ops)) continue;
    for (const key of ['repaveCounter', 'rebootCounter']) {
      if (!isCounter(ops[key]))
        causes.push({ field: `${path}.${key}`, message: 'Invalid value: must be an integer >= 0' });
    }
  }
  if (status.phase !== undefined && !MACHINE_PHASES.includes(String(status.phase))) {
    causes.push({
      field: 'status.phase',
      message: `Unsupported value: ${JSON.stringify(status.phase)}: supported values: ${MACHINE_PHASES.map((p) => `"${p}"`).join(', ')}`,
    });
  }
  if (status.conditions !== undefined) {
    const list = status.conditions;
    if (!Array.isArray(list))
      causes.push({ field: 'status.conditions', message: 'Invalid value: must be a list' });
    else
      list.forEach((c, i) => {
        if (
          !isPlainObject(c) ||
          typeof c.type !== 'string' ||
          !['True', 'False', 'Unknown'].includes(String(c.status))
        ) {
          causes.push({
            field: `status.conditions[${i}]`,
            message: 'Invalid value: needs type and status True/False/Unknown',
          });
        }
      });
  }
  return causes;
};
