import { describe, expect, it } from 'vitest';
import { parseAuthChallenge } from '../../../../src/provision/oci/auth-challenge.js';

describe('parseAuthChallenge', () => {
  it('parses a registry bearer challenge', () => {
    expect(
      parseAuthChallenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull"',
      ),
    ).toEqual({
      scheme: 'bearer',
      params: {
        realm: 'https://auth.docker.io/token',
        service: 'registry.docker.io',
        scope: 'repository:library/busybox:pull',
      },
    });
  });

  it('handles tokens, spaces, escapes and commas inside quotes', () => {
    expect(
      parseAuthChallenge('Bearer realm=https://x/t , scope="repository:a:pull,push", error="say \\"hi\\""'),
    ).toEqual({
      scheme: 'bearer',
      params: { realm: 'https://x/t', scope: 'repository:a:pull,push', error: 'say "hi"' },
    });
  });

  it('reads other schemes and nothing from empty headers', () => {
    expect(parseAuthChallenge('Basic realm="Registry Realm"')).toEqual({
      scheme: 'basic',
      params: { realm: 'Registry Realm' },
    });
    expect(parseAuthChallenge(undefined)).toBeUndefined();
    expect(parseAuthChallenge('')).toBeUndefined();
  });
});
