/**
 * The OpenRPC document, generated from the method table's zod schemas (params as input
 * schemas, results as output schemas). Shared schemas (`.meta({ id })`) are hoisted into
 * `components.schemas`; every application error code is listed under `components.errors`.
 */
import * as z from 'zod';
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import type { MethodDescriptor } from './method.js';

type Json = Record<string, unknown>;

function rewriteRefs(node: unknown, rename: (id: string) => string): unknown {
  if (Array.isArray(node)) return node.map((n) => rewriteRefs(n, rename));
  if (node && typeof node === 'object') {
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string' && v.startsWith('#/$defs/')) {
        out[k] = `#/components/schemas/${rename(v.slice('#/$defs/'.length))}`;
      } else {
        out[k] = rewriteRefs(v, rename);
      }
    }
    return out;
  }
  return node;
}

/** Convert a schema and move its $defs into `components`; returns the schema to embed. */
function convert(schema: z.ZodType, io: 'input' | 'output', components: Json): Json {
  const raw = z.toJSONSchema(schema, { io, unrepresentable: 'any', reused: 'inline' }) as Json;
  const defs = (raw.$defs ?? {}) as Record<string, unknown>;
  const rename = (id: string): string => (io === 'input' ? `${id}Input` : id);
  for (const [id, def] of Object.entries(defs)) components[rename(id)] = rewriteRefs(def, rename);
  const { $schema: _s, $defs: _d, ...rest } = raw;
  return rewriteRefs(rest, rename) as Json;
}

export function errorRefName(code: ErrorCode): string {
  return code;
}

export function buildOpenRpcDocument(methods: readonly MethodDescriptor[], version: string): Json {
  const schemas: Json = {};
  const errors: Json = {};
  for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
    errors[errorRefName(code)] = {
      code: ERROR_CODES[code].rpc,
      message: ERROR_CODES[code].summary,
      data: { code },
    };
  }
  const out = methods.map((m) => {
    const paramsSchema = convert(m.params, 'input', schemas);
    const props = (paramsSchema.properties ?? {}) as Record<string, Json>;
    const required = new Set((paramsSchema.required ?? []) as string[]);
    return {
      name: m.name,
      summary: m.summary,
      description: m.description,
      paramStructure: 'by-name',
      params: Object.entries(props).map(([name, schema]) => ({
        name,
        required: required.has(name),
        ...(typeof schema.description === 'string' ? { description: schema.description } : {}),
        schema,
      })),
      result: { name: `${m.name}Result`, schema: convert(m.result, 'output', schemas) },
      errors: ['INVALID_PARAMS', ...m.errors, ...(m.mutating ? (['DRAINING', 'UNAVAILABLE'] as const) : [])]
        .filter((c, i, all) => all.indexOf(c) === i)
        .map((c) => ({ $ref: `#/components/errors/${errorRefName(c as ErrorCode)}` })),
      'x-mutating': m.mutating,
    };
  });
  return {
    openrpc: '1.3.2',
    info: {
      title: 'agentd control API',
      version,
      description:
        'JSON-RPC 2.0 over HTTP (POST /rpc) on the agentd unix socket. Application errors carry a stable string code in error.data.code.',
    },
    servers: [
      {
        name: 'unix socket',
        url: 'http://localhost/rpc',
        summary: 'curl --unix-socket /run/agentd/agentd.sock',
      },
    ],
    methods: out,
    components: { schemas, errors },
  };
}
