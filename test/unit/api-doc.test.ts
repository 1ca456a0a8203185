/**
 * docs/api.md and docs/metrics.md against the code: every JSON-RPC method is in the methods table
 * with each of its params (and the table names no other method), the mutating methods are the
 * ones the page says, every HTTP route is in the routes table, every error code the page names
 * exists, every status warning code is in the status warnings table, and the fixed `method` labels of the RPC metrics are the ones the dispatcher uses.
 * (Every error code of the catalogue is in docs/errors.md: test/unit/errors.test.ts.)
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { WARNING_CODES } from '../../src/engine/warnings.js';
import { ERROR_CODES } from '../../src/errors.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { createDispatcher, MAX_BATCH_CALLS } from '../../src/rpc/dispatcher.js';
import { METHOD_LIST } from '../../src/rpc/methods/index.js';
import { buildOpenRpcDocument } from '../../src/rpc/openrpc.js';
import type { RpcServices } from '../../src/rpc/services.js';
import { buildOpenApiDocument } from '../../src/server/openapi.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string): Promise<string> => readFile(path.join(REPO_ROOT, file), 'utf8');

/** The cells of the markdown table rows whose first cell is one backticked word, by that word. */
function tableRows(markdown: string, firstCell: RegExp): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const line of markdown.split('\n')) {
    if (!line.startsWith('|')) continue;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    const m = /^`([^`]+)`$/.exec(cells[0] ?? '');
    if (m && firstCell.test(m[1]!)) rows.set(m[1]!, cells.slice(1));
  }
  return rows;
}

/** Every backticked word of a text. */
const backticked = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** The text of the markdown section under `heading`, up to the next heading of any level. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  expect(start, `${heading} in the page`).toBeGreaterThanOrEqual(0);
  const rest = markdown.slice(start + heading.length + 2);
  const end = rest.search(/\n#+ /);
  return end === -1 ? rest : rest.slice(0, end);
}

const METHOD_NAME = /^[a-z][a-zA-Z]*(\.[a-z][a-zA-Z]*)?$/;

describe('docs/api.md', () => {
  it('lists every method in the methods table, and no other', async () => {
    const rows = tableRows(section(await read('docs/api.md'), '## Methods'), METHOD_NAME);
    expect([...rows.keys()].sort()).toEqual(METHOD_LIST.map((m) => m.name).sort());
  });

  it("names each method's params in its row (— for a method without params)", async () => {
    const rows = tableRows(section(await read('docs/api.md'), '## Methods'), METHOD_NAME);
    const doc = buildOpenRpcDocument(METHOD_LIST, '0.0.0') as {
      methods: { name: string; params: { name: string }[] }[];
    };
    for (const m of doc.methods) {
      const cell = rows.get(m.name)?.[0] ?? '';
      const params = m.params.map((p) => p.name);
      // A param is named at the start of a backticked chunk: `set: {kubernetesVersion, ...}`.
      const named = backticked(cell).map((w) => /^[A-Za-z]+/.exec(w)?.[0]);
      if (params.length === 0) expect(cell, m.name).toBe('—');
      else expect(named, m.name).toEqual(expect.arrayContaining(params));
    }
  });

  it('says which methods are mutating, as the method table does', async () => {
    const text = await read('docs/api.md');
    const bullet = /^- \*\*Mutating\*\* methods \(([^)]*)\)/m.exec(text.replace(/\n {2}/g, ' '));
    expect(bullet, 'the "Mutating methods" bullet').not.toBeNull();
    const documented = backticked(bullet![1]!)
      .filter((w) => METHOD_NAME.test(w))
      .sort();
    expect(documented).toEqual(
      METHOD_LIST.filter((m) => m.mutating)
        .map((m) => m.name)
        .sort(),
    );
  });

  it('lists every HTTP route of the OpenAPI document in the routes table', async () => {
    const rows = tableRows(section(await read('docs/api.md'), '## HTTP routes'), /^[A-Z]+ \//);
    const doc = buildOpenApiDocument('0.0.0') as { paths: Record<string, Record<string, unknown>> };
    const routes = Object.entries(doc.paths).flatMap(([p, item]) =>
      Object.keys(item)
        .filter((k) => ['get', 'post', 'put', 'delete', 'patch'].includes(k))
        .map((method) => `${method.toUpperCase()} ${p}`),
    );
    expect([...rows.keys()].sort()).toEqual(routes.sort());
  });

  it('names only error codes that exist', async () => {
    const text = await read('docs/api.md');
    const codes = new Set(backticked(text).filter((w) => /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$|^BUSY$/.test(w)));
    expect(codes.size).toBeGreaterThan(5);
    for (const code of codes) expect(ERROR_CODES, `${code} in docs/api.md`).toHaveProperty(code);
  });

  it('lists every status warning code in the status warnings table, and no other', async () => {
    const rows = tableRows(section(await read('docs/api.md'), '### Status warnings'), /^[a-z]+(-[a-z]+)*$/);
    expect([...rows.keys()]).toEqual([...WARNING_CODES]);
  });

  it('the table reader keeps only matching first cells (so the checks above can fail)', () => {
    const rows = tableRows(
      [
        '| method | params |',
        '| --- | --- |',
        '| `status` | — |',
        '| `agentd_x` | y |',
        'a `drain` in prose',
      ].join('\n'),
      METHOD_NAME,
    );
    expect([...rows.entries()]).toEqual([['status', ['—']]]);
  });
});

describe('docs/metrics.md', () => {
  it('documents the fixed method labels the dispatcher counts calls under, and only those', async () => {
    const metrics = createMetrics({ version: 'test', collectDefaults: false });
    const dispatcher = createDispatcher({
      methods: METHOD_LIST,
      services: {} as RpcServices,
      metrics,
      logger: pino({ level: 'silent' }),
      isDraining: () => false,
      isReady: () => true,
    });
    // Every way a request is refused before it reaches a method.
    await dispatcher.handleText('{', 't');
    await dispatcher.handle({ jsonrpc: '1.0', id: 1, method: 'status' }, 't');
    await dispatcher.handle([], 't');
    await dispatcher.handle({ jsonrpc: '2.0', id: 1, method: 'nosuch' }, 't');
    const call = { jsonrpc: '2.0', id: 1, method: 'nosuch' };
    await dispatcher.handle(
      Array.from({ length: MAX_BATCH_CALLS + 1 }, () => call),
      't',
    );
    dispatcher.refused('PAYLOAD_TOO_LARGE', 'HTTP 413', 't');
    const counted = (await metrics.rpcRequests.get()).values.map((v) => String(v.labels.method));
    const fixed = [...new Set(counted)].filter((l) => !METHOD_LIST.some((m) => m.name === l)).sort();
    expect(fixed).toEqual(['(batch)', '(invalid)', '(unknown)']);

    const rows = tableRows(section(await read('docs/metrics.md'), '## RPC method labels'), /^\(/);
    expect([...rows.keys()].sort()).toEqual(fixed);
  });
});
