import { describe, expect, it } from 'vitest';
import {
  environmentLine,
  quoteUnitValue,
  validateExpandedArg,
} from '../../../../src/provision/files/unit-syntax.js';

describe('unit file quoting', () => {
  it('escapes backslashes, quotes and specifiers', () => {
    expect(quoteUnitValue('a\\b"c%d', 'x')).toBe('"a\\\\b\\"c%%d"');
    expect(environmentLine('FOO', 'two words', 'x')).toBe('Environment="FOO=two words"');
  });

  it('refuses newlines and other control characters', () => {
    for (const bad of ['a\nExecStart=/bin/sh', 'a\rb', 'a\u0000b']) {
      expect(() => quoteUnitValue(bad, 'x')).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
    }
  });

  it('accepts plain arguments for $VAR expansion and refuses what systemd would split or unquote', () => {
    expect(validateExpandedArg('--node-labels=a.io/b=c_d-e', 'x')).toBe('--node-labels=a.io/b=c_d-e');
    for (const bad of ['a b', 'a"b', "a'b", 'a\\b', 'a%b', 'a$b', '']) {
      expect(() => validateExpandedArg(bad, 'x'), bad).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG' }),
      );
    }
  });
});
