import { describe, expect, it } from 'vitest';
import { formatImageReference, parseImageReference } from '../../../src/config/image-reference.js';

const DIGEST = `sha256:${'a'.repeat(64)}`;

describe('parseImageReference', () => {
  it.each([
    [
      'busybox',
      { registry: 'registry-1.docker.io', repository: 'library/busybox', reference: 'latest', tag: 'latest' },
    ],
    [
      'busybox:1.36',
      { registry: 'registry-1.docker.io', repository: 'library/busybox', reference: '1.36', tag: '1.36' },
    ],
    [
      'docker.io/library/debian:12',
      { registry: 'registry-1.docker.io', repository: 'library/debian', reference: '12' },
    ],
    [
      'index.docker.io/nginx',
      { registry: 'registry-1.docker.io', repository: 'library/nginx', reference: 'latest' },
    ],
    ['bitnami/redis:7', { registry: 'registry-1.docker.io', repository: 'bitnami/redis', reference: '7' }],
    [
      'ghcr.io/azure/agent-ubuntu2404:v20260427',
      { registry: 'ghcr.io', repository: 'azure/agent-ubuntu2404', reference: 'v20260427', tag: 'v20260427' },
    ],
    [
      '127.0.0.1:5000/sim/rootfs:v1',
      { registry: '127.0.0.1:5000', repository: 'sim/rootfs', reference: 'v1' },
    ],
    ['localhost/rootfs', { registry: 'localhost', repository: 'rootfs', reference: 'latest' }],
    ['[::1]:5000/rootfs:x', { registry: '[::1]:5000', repository: 'rootfs', reference: 'x' }],
    [
      'quay.io/a/b/c__d-e.f:tag_1.2-3',
      { registry: 'quay.io', repository: 'a/b/c__d-e.f', reference: 'tag_1.2-3' },
    ],
  ])('%s', (ref, expected) => {
    expect(parseImageReference(ref)).toMatchObject(expected);
  });

  it('prefers the digest over the tag and keeps both', () => {
    expect(parseImageReference(`ghcr.io/x/y:v1@${DIGEST}`)).toEqual({
      registry: 'ghcr.io',
      repository: 'x/y',
      reference: DIGEST,
      tag: 'v1',
      digest: DIGEST,
    });
    expect(parseImageReference(`ghcr.io/x/y@${DIGEST}`)).toEqual({
      registry: 'ghcr.io',
      repository: 'x/y',
      reference: DIGEST,
      digest: DIGEST,
    });
  });

  it.each([
    '',
    ' busybox',
    'Busybox',
    'ghcr.io/Azure/x',
    'ghcr.io//x',
    'x:',
    'x:-bad',
    `x@sha256:${'A'.repeat(64)}`,
    'x@sha512:abc',
    'x@',
    'ghcr.io:99999999/x',
    'a/b:c:d',
    'has space:1',
    `${'a'.repeat(256)}`,
  ])('rejects %j with INVALID_CONFIG', (ref) => {
    expect(() => parseImageReference(ref)).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
  });

  it('formats references back', () => {
    expect(formatImageReference(parseImageReference('busybox'))).toBe(
      'registry-1.docker.io/library/busybox:latest',
    );
    expect(formatImageReference(parseImageReference(`ghcr.io/x/y:v1@${DIGEST}`))).toBe(
      `ghcr.io/x/y@${DIGEST}`,
    );
  });
});
