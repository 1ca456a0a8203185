import { describe, expect, it } from 'vitest';
import {
  isPlainHttpAllowed,
  registryBaseUrl,
  registryHostname,
  validateRegistryUrl,
} from '../../../../src/provision/oci/registry-scheme.js';

describe('registry scheme policy', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '::1',
    'localhost',
    'LOCALHOST',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.7.7',
    '::ffff:10.0.0.1',
  ])('allows plain HTTP to %s', (host) => expect(isPlainHttpAllowed(host)).toBe(true));

  it.each([
    'registry-1.docker.io',
    'ghcr.io',
    '8.8.8.8',
    '172.32.0.1',
    '172.15.0.1',
    '192.169.0.1',
    '11.0.0.1',
    '2001:db8::1',
    'localhost.example.com',
    '10.0.0.1.nip.io',
  ])('requires HTTPS for %s', (host) => expect(isPlainHttpAllowed(host)).toBe(false));

  it('chooses the base URL from the registry host', () => {
    expect(registryBaseUrl('registry-1.docker.io')).toBe('https://registry-1.docker.io');
    expect(registryBaseUrl('ghcr.io:443')).toBe('https://ghcr.io:443');
    expect(registryBaseUrl('127.0.0.1:5000')).toBe('http://127.0.0.1:5000');
    expect(registryBaseUrl('[::1]:5000')).toBe('http://[::1]:5000');
    expect(registryBaseUrl('192.168.1.10:5000')).toBe('http://192.168.1.10:5000');
  });

  it('extracts host names', () => {
    expect(registryHostname('a.b:5000')).toBe('a.b');
    expect(registryHostname('[::1]:5000')).toBe('::1');
    expect(registryHostname('a.b')).toBe('a.b');
  });

  it('refuses plain-HTTP URLs to public hosts (token realms, redirects)', () => {
    expect(() => validateRegistryUrl(new URL('http://auth.example.com/token'), 'token')).toThrow(
      expect.objectContaining({ code: 'IMAGE_PULL_FAILED' }),
    );
    expect(() => validateRegistryUrl(new URL('ftp://10.0.0.1/x'), 'blob')).toThrow(
      expect.objectContaining({ code: 'IMAGE_PULL_FAILED' }),
    );
    expect(() => validateRegistryUrl(new URL('https://auth.example.com/token'), 'token')).not.toThrow();
    expect(() => validateRegistryUrl(new URL('http://[::1]:9/token'), 'token')).not.toThrow();
    expect(() => validateRegistryUrl(new URL('http://127.0.0.1:9/token'), 'token')).not.toThrow();
  });
});
