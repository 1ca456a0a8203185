import { describe, expect, it } from 'vitest';
import { AgentError, ERROR_CODES, NotFoundError, type ErrorCode } from '../../../src/errors.js';
import { makeWireError, toWireError } from '../../../src/rpc/error-map.js';

const CODES = Object.keys(ERROR_CODES) as ErrorCode[];

describe('ERROR_CODES', () => {
  it('numeric codes are unique', () => {
    const numbers = CODES.map((c) => ERROR_CODES[c].rpc);
    expect(new Set(numbers).size).toBe(numbers.length);
  });

  it('spec errors keep their spec codes; application errors stay outside -32768..-32000', () => {
    expect(ERROR_CODES.PARSE_ERROR.rpc).toBe(-32700);
    expect(ERROR_CODES.INVALID_REQUEST.rpc).toBe(-32600);
    expect(ERROR_CODES.METHOD_NOT_FOUND.rpc).toBe(-32601);
    expect(ERROR_CODES.INVALID_PARAMS.rpc).toBe(-32602);
    expect(ERROR_CODES.INTERNAL.rpc).toBe(-32603);
    const spec = new Set<ErrorCode>([
      'PARSE_ERROR',
      'INVALID_REQUEST',
      'METHOD_NOT_FOUND',
      'INVALID_PARAMS',
      'INTERNAL',
    ]);
    for (const code of CODES.filter((c) => !spec.has(c))) {
      const n = ERROR_CODES[code].rpc;
      expect(n >= -32768 && n <= -32000, `${code} uses reserved code ${n}`).toBe(false);
    }
  });

  it('every code has a summary sentence', () => {
    for (const code of CODES) expect(ERROR_CODES[code].summary, code).toMatch(/^[A-Z].*\.$/);
  });
});

describe('toWireError', () => {
  it.each(CODES)('an AgentError with code %s keeps its numeric code, message and data', (code) => {
    const { error, internal } = toWireError(new AgentError(code, `boom ${code}`, { data: { detail: 1 } }));
    expect(internal).toBe(false);
    expect(error).toEqual({
      code: ERROR_CODES[code].rpc,
      message: `boom ${code}`,
      data: { detail: 1, code },
    });
  });

  it('the string code wins over a `code` key in the error data', () => {
    const { error } = toWireError(new NotFoundError('x', { data: { code: 'SPOOFED' } }));
    expect(error.data.code).toBe('NOT_FOUND');
  });

  it.each([
    ['an Error', new Error('secret at /etc/shadow')],
    ['a string', 'secret'],
    ['undefined', undefined],
    ['an object', { message: 'secret' }],
  ])('%s is an internal error with a fixed message', (_name, thrown) => {
    const { error, internal } = toWireError(thrown);
    expect(internal).toBe(true);
    expect(error).toEqual({
      code: -32603,
      message: 'internal error; see the agentd log',
      data: { code: 'INTERNAL' },
    });
  });
});

describe('makeWireError', () => {
  it('makeWireError puts the string code in data.code next to the data', () => {
    expect(makeWireError('BUSY', 'busy', { operation: 'op-1' })).toEqual({
      code: 1001,
      message: 'busy',
      data: { operation: 'op-1', code: 'BUSY' },
    });
  });
});
