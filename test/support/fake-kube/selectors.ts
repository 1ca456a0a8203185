/** Field selectors (`spec.nodeName=n1,metadata.name!=x`) and label selectors, as the server parses them. */
import { badRequest } from './status.js';
import { isPlainObject } from './types.js';
import type { KubeObject } from './types.js';

export interface FieldRequirement {
  field: string;
  equal: boolean;
  value: string;
}

/** Parse `fieldSelector`; fields the resource does not support are a 400, as on a real server. */
export function parseFieldSelector(
  selector: string | null,
  supported: readonly string[],
): FieldRequirement[] {
  if (selector === null || selector === '') return [];
  return selector.split(',').map((term) => {
    const m = /^([^!=]+)(==|=|!=)(.*)$/.exec(term.trim());
    if (!m) throw badRequest(`invalid field selector: ${JSON.stringify(term)}`);
    const [, field = '', op, value = ''] = m;
    if (!supported.includes(field)) {
      throw badRequest(
        `field label not supported: ${field} (supported: ${supported.map((s) => JSON.stringify(s)).join(', ')})`,
      );
    }
    return { field, equal: op !== '!=', value };
  });
}

function fieldValue(obj: KubeObject, path: string): string {
  let current: unknown = obj;
  for (const part of path.split('.')) current = isPlainObject(current) ? current[part] : undefined;
  if (current === undefined || current === null) return '';
  return String(current);
}

export function matchesFields(obj: KubeObject, requirements: FieldRequirement[]): boolean {
  return requirements.every((r) => (fieldValue(obj, r.field) === r.value) === r.equal);
}

type LabelTest = (labels: Record<string, string>) => boolean;

/** Parse the query-string label selector form: `a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`. */
export function parseLabelSelector(selector: string | null): LabelTest {
  if (selector === null || selector === '') return () => true;
  const terms = selector.match(/([^,(]+(\([^)]*\))?)/g) ?? [];
  const tests: LabelTest[] = terms.map((raw) => {
    const term = raw.trim();
    let m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (m) {
      const [, key = '', op, list = ''] = m;
      const values = list.split(',').map((v) => v.trim());
      return op === 'in'
        ? (l) => l[key] !== undefined && values.includes(l[key])
        : (l) => l[key] === undefined || !values.includes(l[key]);
    }
    m = /^([^!=]+)(==|=|!=)(.*)$/.exec(term);
    if (m) {
      const [, key = '', op, value = ''] = m;
      return op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value;
    }
    if (term.startsWith('!')) return (l) => l[term.slice(1)] === undefined;
    if (/^\S+$/.test(term)) return (l) => l[term] !== undefined;
    throw badRequest(`invalid label selector: ${JSON.stringify(term)}`);
  });
  return (labels) => tests.every((t) => t(labels));
}

/**
 * A `metav1.LabelSelector` (as used by PodDisruptionBudgets): an empty selector matches
 * everything, a null one nothing.
 */
export function matchesLabelSelector(labels: Record<string, string>, selector: unknown): boolean {
  if (!isPlainObject(selector)) return false;
  const matchLabels = isPlainObject(selector.matchLabels) ? selector.matchLabels : {};
  for (const [k, v] of Object.entries(matchLabels)) if (labels[k] !== v) return false;
  const expressions = Array.isArray(selector.matchExpressions) ? selector.matchExpressions : [];
  for (const expr of expressions) {
    if (!isPlainObject(expr) || typeof expr.key !== 'string') return false;
    const values = Array.isArray(expr.values) ? expr.values.map(String) : [];
    const has = labels[expr.key] !== undefined;
    const value = labels[expr.key] ?? '';
    const ok =
      expr.operator === 'In'
        ? has && values.includes(value)
        : expr.operator === 'NotIn'
          ? !has || !values.includes(value)
          : expr.operator === 'Exists'
            ? has
            : expr.operator === 'DoesNotExist'
              ? !has
              : false;
    if (!ok) return false;
  }
  return true;
}
