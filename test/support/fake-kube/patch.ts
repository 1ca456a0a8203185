/** JSON merge patch (RFC 7386) and JSON patch (RFC 6902), applied the way the API server does. */
import { isDeepStrictEqual } from 'node:util';
import { badRequest, HttpError, statusObject } from './status.js';
import { isPlainObject } from './types.js';

/** RFC 7386: objects merge key by key, `null` deletes, anything else (lists too) replaces. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) Reflect.deleteProperty(result, key);
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

function patchFailed(message: string): HttpError {
  // The real server answers a JSON patch that cannot be applied with 422 and this wording.
  return new HttpError(
    422,
    statusObject(
      422,
      'Invalid',
      `the server rejected our request due to an error in our request: ${message}`,
    ),
  );
}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw patchFailed(`invalid JSON pointer ${JSON.stringify(pointer)}`);
  return pointer
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

type Container = Record<string, unknown> | unknown[];

/** Walk to the parent of the pointer's last token. */
function resolveParent(doc: unknown, tokens: string[], pointer: string): { parent: Container; key: string } {
  let current = doc;
  for (const token of tokens.slice(0, -1)) {
    if (Array.isArray(current)) current = current[Number(token)];
    else if (isPlainObject(current)) current = current[token];
    else throw patchFailed(`path ${pointer} does not exist`);
  }
  if (!Array.isArray(current) && !isPlainObject(current)) throw patchFailed(`path ${pointer} does not exist`);
  return { parent: current, key: tokens[tokens.length - 1] ?? '' };
}

function arrayIndex(arr: unknown[], key: string, pointer: string, forAdd: boolean): number {
  if (forAdd && key === '-') return arr.length;
  if (!/^\d+$/.test(key)) throw patchFailed(`invalid array index in ${pointer}`);
  const index = Number(key);
  if (index > arr.length || (!forAdd && index === arr.length))
    throw patchFailed(`index out of range in ${pointer}`);
  return index;
}

function getAt(doc: unknown, pointer: string): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return doc;
  const { parent, key } = resolveParent(doc, tokens, pointer);
  if (Array.isArray(parent)) return parent[arrayIndex(parent, key, pointer, false)];
  if (!(key in parent)) throw patchFailed(`path ${pointer} does not exist`);
  return parent[key];
}

function removeAt(doc: unknown, pointer: string): unknown {
  const tokens = parsePointer(pointer);
  const { parent, key } = resolveParent(doc, tokens, pointer);
  if (Array.isArray(parent)) return parent.splice(arrayIndex(parent, key, pointer, false), 1)[0];
  if (!(key in parent))
    throw patchFailed(`unable to remove nonexistent key ${JSON.stringify(key)}: missing value`);
  const old = parent[key];
  Reflect.deleteProperty(parent, key);
  return old;
}

function addAt(doc: unknown, pointer: string, value: unknown, replace: boolean): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return structuredClone(value);
  const { parent, key } = resolveParent(doc, tokens, pointer);
  if (Array.isArray(parent)) {
    const index = arrayIndex(parent, key, pointer, !replace);
    parent.splice(index, replace ? 1 : 0, structuredClone(value));
  } else {
    if (replace && !(key in parent))
      throw patchFailed(`replace operation does not apply: doc is missing key: ${pointer}`);
    parent[key] = structuredClone(value);
  }
  return doc;
}

/** RFC 6902 over a copy of `target`; a failing op (or `test`) fails the whole patch. */
export function applyJsonPatch(target: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch)) throw badRequest('json patch must be a JSON array of operations');
  let doc = structuredClone(target);
  for (const op of patch) {
    if (!isPlainObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string') {
      throw badRequest(`invalid json patch operation ${JSON.stringify(op)}`);
    }
    const from = typeof op.from === 'string' ? op.from : undefined;
    switch (op.op) {
      case 'add':
        doc = addAt(doc, op.path, op.value, false);
        break;
      case 'replace':
        doc = addAt(doc, op.path, op.value, true);
        break;
      case 'remove':
        removeAt(doc, op.path);
        break;
      case 'move': {
        if (from === undefined) throw badRequest('move operation needs "from"');
        const value = removeAt(doc, from);
        doc = addAt(doc, op.path, value, false);
        break;
      }
      case 'copy':
        if (from === undefined) throw badRequest('copy operation needs "from"');
        doc = addAt(doc, op.path, getAt(doc, from), false);
        break;
      case 'test':
        if (!isDeepStrictEqual(getAt(doc, op.path), op.value))
          throw patchFailed(`testing value ${op.path} failed`);
        break;
      default:
        throw badRequest(`unknown json patch operation ${JSON.stringify(op.op)}`);
    }
  }
  return doc;
}
