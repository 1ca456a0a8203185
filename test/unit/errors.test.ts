/**
 * The error catalogue (src/errors.ts), docs/errors.md and the OpenRPC document's
 * components.errors list the same codes, both ways, with the same numeric JSON-RPC codes.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DownloadFailedError,
  ERROR_CODES,
  noSpaceOr,
  NotFoundError,
  toAgentError,
  type ErrorCode,
} from '../../src/errors.js';
import { METHOD_LIST } from '../../src/rpc/methods/index.js';
import { buildOpenRpcDocument } from '../../src/rpc/openrpc.js';
import { VERSION } from '../../src/version.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
const catalogue = Object.keys(ERROR_CODES).sort();

/**
 * The rows of the markdown tables in errors.md whose first cell is a backticked code in
 * SCREAMING_SNAKE_CASE: code → the JSON-RPC number in the second cell.
 */
function documentedCodes(markdown: string): Map<string, number> {
  const rows = new Map<string, number>();
  for (const line of markdown.split('\n')) {
    const m = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*(-?\d+)\s*\|/.exec(line);
    if (m) rows.set(m[1]!, Number(m[2]));
  }
  return rows;
}

describe('AgentError', () => {
  it('redacts its message and data when it is made (the one redactor): URL userinfo, echoed credentials', () => {
    const err = new DownloadFailedError(
      'download kubelet from http://user:S3cretPass@mirror/k: refused Authorization: Bearer S3cretToken42',
      { data: { url: 'http://user:S3cretPass@mirror/k', headers: { authorization: 'Basic S3cretBasic==' } } },
    );
    expect(err.message).toBe(
      'download kubelet from http://***@mirror/k: refused Authorization: Bearer [REDACTED]',
    );
    expect(err.data).toEqual({ url: 'http://***@mirror/k', headers: { authorization: '[REDACTED]' } });
  });
});

describe('error codes', () => {
  it('are all documented in docs/errors.md with their JSON-RPC code, and nothing else is', async () => {
    const doc = documentedCodes(await readFile(path.join(REPO_ROOT, 'docs/errors.md'), 'utf8'));
    expect([...doc.keys()].sort()).toEqual(catalogue);
    for (const code of catalogue as ErrorCode[]) {
      expect(doc.get(code), `JSON-RPC code of ${code} in docs/errors.md`).toBe(ERROR_CODES[code].rpc);
    }
  });

  it('are all in the OpenRPC components.errors, and nothing else is', () => {
    const doc = buildOpenRpcDocument(METHOD_LIST, VERSION) as {
      components: { errors: Record<string, { code: number; data: { code: string } }> };
    };
    const errors = doc.components.errors;
    expect(Object.keys(errors).sort()).toEqual(catalogue);
    for (const [name, e] of Object.entries(errors)) {
      expect(e.data.code).toBe(name);
      expect(e.code).toBe(ERROR_CODES[name as ErrorCode].rpc);
    }
  });

  it('use unique JSON-RPC codes, application codes outside the reserved range', () => {
    const numbers = Object.values(ERROR_CODES).map((e) => e.rpc);
    expect(new Set(numbers).size).toBe(numbers.length);
    const spec = new Set([-32700, -32600, -32601, -32602, -32603]);
    for (const n of numbers) {
      if (!spec.has(n)) expect(n < -32768 || n > -32000, `${n} is in the reserved range`).toBe(true);
    }
  });

  it('the table reader finds codes and ignores prose (so the checks above can fail)', () => {
    const rows = documentedCodes(
      [
        '| code | JSON-RPC |',
        '| --- | --- |',
        '| `BUSY` | 1001 | x |',
        '|  `PARSE_ERROR`  | -32700 | y |',
        'The `DRAINING` code is prose.',
      ].join('\n'),
    );
    expect([...rows.entries()]).toEqual([
      ['BUSY', 1001],
      ['PARSE_ERROR', -32700],
    ]);
  });
});

describe('toAgentError: the one converter of foreign errors', () => {
  const errno = (code: string): Error => Object.assign(new Error(`${code}: boom`), { code });

  it('passes AgentErrors through and keeps the foreign error as cause otherwise', () => {
    const own = new NotFoundError('operation x');
    expect(toAgentError(own, 'get x')).toBe(own);
    const foreign = errno('EACCES');
    const err = toAgentError(foreign, 'write /x');
    expect(err).toMatchObject({
      code: 'INTERNAL',
      message: 'write /x: EACCES: boom',
      data: { errno: 'EACCES' },
    });
    expect(err.cause).toBe(foreign);
  });

  it('makes ENOSPC and EDQUOT NO_SPACE, wherever they sit in the cause chain', () => {
    expect(toAgentError(errno('ENOSPC'), 'write /x')).toMatchObject({
      code: 'NO_SPACE',
      message: 'write /x: no space left on device',
    });
    const wrapped = new Error('pipeline failed', { cause: errno('EDQUOT') });
    expect(toAgentError(wrapped, 'download y').code).toBe('NO_SPACE');
    expect(noSpaceOr(wrapped, 'write z')).toMatchObject({ code: 'NO_SPACE' });
    const reset = errno('ECONNRESET');
    expect(noSpaceOr(reset, 'write z')).toBe(reset);
  });

  it('makes a fired signal or an AbortError CANCELLED', () => {
    const controller = new AbortController();
    controller.abort();
    expect(toAgentError(errno('ENOSPC'), 'pull', { signal: controller.signal }).code).toBe('CANCELLED');
    const abort = Object.assign(new Error('aborted'), { name: 'AbortError' });
    expect(toAgentError(abort, 'pull')).toMatchObject({ code: 'CANCELLED', message: 'pull: cancelled' });
  });

  it('lets the caller choose the error for everything else', () => {
    const err = toAgentError(errno('ECONNRESET'), 'download k', {
      otherwise: (message, cause, code) => new DownloadFailedError(message, { cause, data: { code } }),
    });
    expect(err).toMatchObject({ code: 'DOWNLOAD_FAILED', data: { code: 'ECONNRESET' } });
  });
});
