import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { ERROR_CODES, type ErrorCode } from '../../../src/errors.js';
import { defineMethod, type MethodDescriptor } from '../../../src/rpc/method.js';
import { METHOD_LIST } from '../../../src/rpc/methods/index.js';
import { buildOpenRpcDocument } from '../../../src/rpc/openrpc.js';

interface OpenRpcMethod {
  name: string;
  paramStructure: string;
  params: { name: string; required: boolean; schema: Record<string, unknown> }[];
  result: { name: string; schema: Record<string, unknown> };
  errors: { $ref: string }[];
  'x-mutating': boolean;
}

interface OpenRpcDoc {
  openrpc: string;
  info: { version: string };
  methods: OpenRpcMethod[];
  components: {
    schemas: Record<string, unknown>;
    errors: Record<string, { code: number; message: string; data: { code: string } }>;
  };
}

const mutating = defineMethod({
  name: 'test.mutate',
  summary: 'A mutating test method.',
  description: 'Only here to check the errors every mutating method documents.',
  mutating: true,
  errors: ['BUSY', 'NOT_FOUND'],
  params: z.strictObject({
    id: z.string().meta({ description: 'Which one.' }),
    force: z.boolean().default(false),
  }),
  result: z.object({ ok: z.boolean() }),
  handler: async () => ({ ok: true }),
});

const methods = [...METHOD_LIST, mutating as unknown as MethodDescriptor];
const doc = buildOpenRpcDocument(methods, '9.9.9') as unknown as OpenRpcDoc;

/** Every `$ref` string anywhere in a JSON value. */
function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refs(n, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

describe('buildOpenRpcDocument', () => {
  it('is an OpenRPC 1.x document with the given version', () => {
    expect(doc.openrpc).toMatch(/^1\./);
    expect(doc.info.version).toBe('9.9.9');
  });

  it('lists every ERROR_CODES entry under components.errors with its numeric and string code', () => {
    const codes = Object.keys(ERROR_CODES) as ErrorCode[];
    expect(Object.keys(doc.components.errors).sort()).toEqual([...codes].sort());
    for (const code of codes) {
      expect(doc.components.errors[code]).toEqual({
        code: ERROR_CODES[code].rpc,
        message: ERROR_CODES[code].summary,
        data: { code },
      });
    }
  });

  it('lists every method of the table once, by name', () => {
    const names = doc.methods.map((m) => m.name);
    expect(names).toEqual(methods.map((m) => m.name));
    expect(new Set(names).size).toBe(names.length);
    expect(names).toContain('status');
    expect(names).toContain('rpc.discover');
  });

  it('method errors reference only errors that exist, and include the method’s own', () => {
    for (const m of doc.methods) {
      for (const { $ref } of m.errors) {
        expect($ref, m.name).toMatch(/^#\/components\/errors\//);
        const code = $ref.slice('#/components/errors/'.length);
        expect(doc.components.errors[code], `${m.name} references ${$ref}`).toBeDefined();
      }
      const declared = methods.find((d) => d.name === m.name)?.errors ?? [];
      const listed = m.errors.map((e) => e.$ref.split('/').pop());
      for (const code of declared) expect(listed, m.name).toContain(code);
      expect(listed, m.name).toContain('INVALID_PARAMS');
      expect(new Set(listed).size, `${m.name} lists an error twice`).toBe(listed.length);
    }
  });

  it('a mutating method documents DRAINING and UNAVAILABLE; a read-only one does not', () => {
    const mut = doc.methods.find((m) => m.name === 'test.mutate');
    const listed = mut?.errors.map((e) => e.$ref.split('/').pop());
    expect(listed).toEqual(['INVALID_PARAMS', 'BUSY', 'NOT_FOUND', 'DRAINING', 'UNAVAILABLE']);
    expect(mut?.['x-mutating']).toBe(true);
    const status = doc.methods.find((m) => m.name === 'status');
    expect(status?.['x-mutating']).toBe(false);
    expect(status?.errors.map((e) => e.$ref.split('/').pop())).not.toContain('DRAINING');
  });

  it('params are named, with required flags and descriptions from the schema', () => {
    const mut = doc.methods.find((m) => m.name === 'test.mutate');
    expect(mut?.paramStructure).toBe('by-name');
    expect(mut?.params.map((p) => [p.name, p.required])).toEqual([
      ['id', true],
      ['force', false],
    ]);
    expect(mut?.params[0]).toMatchObject({ description: 'Which one.' });
  });

  it('every schema $ref points into components.schemas and resolves', () => {
    const all = refs(doc.methods).concat(refs(doc.components.schemas));
    for (const ref of all.filter((r) => !r.startsWith('#/components/errors/'))) {
      expect(ref).toMatch(/^#\/components\/schemas\//);
      expect(doc.components.schemas[ref.slice('#/components/schemas/'.length)], ref).toBeDefined();
    }
  });

  it('is plain JSON (survives a round trip unchanged)', () => {
    expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
  });
});

describe('label and taint syntax in the OpenRPC document', () => {
  /** The `set` param of a method, as the document gives it. */
  function setSchema(method: string) {
    const param = doc.methods.find((m) => m.name === method)?.params.find((p) => p.name === 'set');
    return param?.schema as {
      properties: {
        nodeLabels: { propertyNames: { pattern: string }; additionalProperties: { pattern: string } };
        registerWithTaints: { items: { pattern: string } };
      };
    };
  }

  it.each(['update', 'preflight'])(
    '%s set.nodeLabels and set.registerWithTaints carry the Kubernetes patterns, which a client can check',
    (method) => {
      const { nodeLabels, registerWithTaints } = setSchema(method).properties;
      const key = new RegExp(nodeLabels.propertyNames.pattern);
      const value = new RegExp(nodeLabels.additionalProperties.pattern);
      const taint = new RegExp(registerWithTaints.items.pattern);
      for (const ok of ['plain', 'node.kubernetes.io/role', 'a.b/c_d.e-f', 'x'.repeat(63)]) {
        expect(key.test(ok), ok).toBe(true);
      }
      for (const bad of ['Bad Key', '/x', '-a', 'a/', 'UPPER.io/x', 'x'.repeat(64)]) {
        expect(key.test(bad), bad).toBe(false);
      }
      for (const ok of ['', 'dc-1', 'X_y.z']) expect(value.test(ok), ok).toBe(true);
      for (const bad of ['-x', 'a b', 'v'.repeat(64)]) expect(value.test(bad), bad).toBe(false);
      for (const ok of ['dedicated=gpu:NoSchedule', 'node.io/special:NoExecute', 'a=:PreferNoSchedule']) {
        expect(taint.test(ok), ok).toBe(true);
      }
      for (const bad of [
        'dedicated=gpu',
        'a=b:Sometimes',
        ':NoSchedule',
        '_a:NoExecute',
        'a=b,c:NoSchedule',
      ]) {
        expect(taint.test(bad), bad).toBe(false);
      }
    },
  );
});
