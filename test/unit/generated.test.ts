/**
 * The checked-in generated documents (OpenAPI, OpenRPC, CLI reference) must equal a fresh
 * generation, and must be valid: the OpenAPI document against the OpenAPI 3.1 schema, the
 * OpenRPC document by shape (every method, params and result, every $ref resolving).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { GENERATED_FILES, REPO_ROOT, generateAll } from '../../scripts/generate.js';
import { METHOD_LIST } from '../../src/rpc/methods/index.js';

type Json = Record<string, unknown>;

const fresh = await generateAll();

async function checkedIn(rel: string): Promise<string | null> {
  return readFile(path.join(REPO_ROOT, rel), 'utf8').catch(() => null);
}

/** Every `$ref` string anywhere in a document, with where it was found. */
function collectRefs(node: unknown, at: string, out: { ref: string; at: string }[] = []) {
  if (Array.isArray(node)) node.forEach((n, i) => collectRefs(n, `${at}/${i}`, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push({ ref: v, at });
      else collectRefs(v, `${at}/${k}`, out);
    }
  }
  return out;
}

/** Resolve a local JSON pointer (`#/a/b`) in a document; undefined when it does not resolve. */
function resolvePointer(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (!node || typeof node !== 'object' || !(key in node)) return undefined;
    node = (node as Json)[key];
  }
  return node;
}

describe('generated documents', () => {
  it.each(GENERATED_FILES)('%s is up to date', async (rel) => {
    const onDisk = await checkedIn(rel);
    expect(onDisk, `${rel} is missing: run npm run generate`).not.toBeNull();
    // A plain equality first: a diff of a whole document is noise, the instruction is what helps.
    expect(onDisk === fresh[rel], `${rel} is stale: run npm run generate and commit the result`).toBe(true);
  });

  it('the OpenAPI document is valid OpenAPI 3.1', async () => {
    const doc = parseYaml(fresh['openapi/agentd.openapi.yaml']) as Json;
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc);
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('the OpenAPI document describes every HTTP route of the admin socket', () => {
    const doc = parseYaml(fresh['openapi/agentd.openapi.yaml']) as { paths: Json };
    expect(Object.keys(doc.paths).sort()).toEqual(
      ['/rpc', '/healthz', '/readyz', '/metrics', '/v1/events', '/openapi.json'].sort(),
    );
  });

  describe('the OpenRPC document', () => {
    const doc = JSON.parse(fresh['openapi/agentd.openrpc.json']) as {
      openrpc: string;
      info: { version: string };
      methods: { name: string; params: unknown; result: { name?: string; schema?: unknown } }[];
      components: { schemas: Json; errors: Json };
    };

    it('has the OpenRPC header', () => {
      expect(doc.openrpc).toMatch(/^1\.\d+\.\d+$/);
      expect(typeof doc.info.version).toBe('string');
    });

    it('lists every method of the method table exactly once, with params and result', () => {
      expect(doc.methods.map((m) => m.name).sort()).toEqual(METHOD_LIST.map((m) => m.name).sort());
      for (const m of doc.methods) {
        expect(Array.isArray(m.params), `${m.name}.params`).toBe(true);
        expect(typeof m.result.name, `${m.name}.result.name`).toBe('string');
        expect(m.result.schema, `${m.name}.result.schema`).toBeTypeOf('object');
      }
    });

    it('resolves every $ref within the document', () => {
      const refs = collectRefs(doc, '#');
      expect(refs.length).toBeGreaterThan(0);
      const dangling = refs.filter((r) => resolvePointer(doc, r.ref) === undefined);
      expect(dangling).toEqual([]);
    });
  });

  it('the reference resolver rejects a dangling pointer (so the check above can fail)', () => {
    expect(resolvePointer({ a: { b: 1 } }, '#/a/b')).toBe(1);
    expect(resolvePointer({ a: { b: 1 } }, '#/a/c')).toBeUndefined();
    expect(resolvePointer({ a: {} }, 'other.json#/a')).toBeUndefined();
  });
});
