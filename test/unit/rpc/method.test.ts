import { describe, expect, it } from 'vitest';
import { keyJoiner } from '../../../src/rpc/method.js';

describe('keyJoiner', () => {
  it('joins the parts, and keeps the key while no part changed', () => {
    const join = keyJoiner();
    const k = join('1|2|null', 'ready', 'off:x');
    expect(k).toBe('1|2|null|ready|off:x');
    expect(join('1|2|null', 'ready', `off:${'x'}`)).toBe(k);
  });

  it('rebuilds the key when any one part changes', () => {
    const join = keyJoiner();
    join('a', 'b', 'c');
    expect(join('a2', 'b', 'c')).toBe('a2|b|c');
    expect(join('a2', 'b2', 'c')).toBe('a2|b2|c');
    expect(join('a2', 'b2', 'c2')).toBe('a2|b2|c2');
    expect(join('a', 'b', 'c')).toBe('a|b|c');
  });
});
