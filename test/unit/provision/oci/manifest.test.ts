import { describe, expect, it } from 'vitest';
import { parseManifestDocument, selectPlatformManifest } from '../../../../src/provision/oci/manifest.js';
import type { ImageIndex } from '../../../../src/provision/oci/manifest.js';
import { zstdDecoderOf } from '../../../../src/provision/oci/media-types.js';

const d = (c: string): string => `sha256:${c.repeat(64)}`;
const layer = { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: d('1'), size: 10 };
const config = { mediaType: 'application/vnd.oci.image.config.v1+json', digest: d('2'), size: 5 };
const doc = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

function entry(architecture: string, os = 'linux', variant?: string, digest = d('3')) {
  return {
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    digest,
    size: 100,
    platform: { architecture, os, ...(variant ? { variant } : {}) },
  };
}

describe('parseManifestDocument', () => {
  it('reads OCI and Docker manifests', () => {
    const oci = parseManifestDocument(
      doc({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config,
        layers: [layer],
      }),
      undefined,
      'x',
    );
    expect(oci).toEqual({ kind: 'manifest', config, layers: [layer] });
    const docker = parseManifestDocument(
      doc({
        schemaVersion: 2,
        mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
        config: { ...config, mediaType: 'application/vnd.docker.container.image.v1+json' },
        layers: [{ ...layer, mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip' }],
      }),
      undefined,
      'x',
    );
    expect(docker.kind).toBe('manifest');
  });

  it('reads indexes and manifest lists, using Content-Type or the shape when mediaType is absent', () => {
    const list = parseManifestDocument(
      doc({
        schemaVersion: 2,
        mediaType: 'application/vnd.docker.distribution.manifest.list.v2+json',
        manifests: [entry('amd64')],
      }),
      undefined,
      'x',
    );
    expect(list.kind).toBe('index');
    expect(
      parseManifestDocument(
        doc({ schemaVersion: 2, manifests: [] }),
        'application/vnd.oci.image.index.v1+json',
        'x',
      ).kind,
    ).toBe('index');
    expect(
      parseManifestDocument(doc({ schemaVersion: 2, manifests: [] }), 'application/json', 'x').kind,
    ).toBe('index');
    expect(
      parseManifestDocument(
        doc({ schemaVersion: 2, config, layers: [layer] }),
        'application/vnd.oci.image.manifest.v1+json',
        'x',
      ).kind,
    ).toBe('manifest');
  });

  it.each([
    ['not JSON', Buffer.from('{'), 'IMAGE_PULL_FAILED'],
    ['no layers', doc({ schemaVersion: 2, config, layers: [] }), 'IMAGE_PULL_FAILED'],
    [
      'a bad digest',
      doc({ schemaVersion: 2, config, layers: [{ ...layer, digest: 'sha256:xyz' }] }),
      'IMAGE_PULL_FAILED',
    ],
    [
      'a sha512 digest',
      doc({ schemaVersion: 2, config, layers: [{ ...layer, digest: `sha512:${'a'.repeat(128)}` }] }),
      'IMAGE_PULL_FAILED',
    ],
    ['schema 1', doc({ schemaVersion: 1, name: 'x', fsLayers: [] }), 'UNSUPPORTED'],
    [
      'an unknown media type',
      doc({ schemaVersion: 2, mediaType: 'application/vnd.foo+json', config, layers: [layer] }),
      'UNSUPPORTED',
    ],
    [
      'a non-layer layer',
      doc({
        schemaVersion: 2,
        config,
        layers: [{ ...layer, mediaType: 'application/vnd.cncf.helm.chart.content.v1.tar+gzip' }],
      }),
      'UNSUPPORTED',
    ],
  ])('rejects %s', (_name, body, code) => {
    expect(() => parseManifestDocument(body, undefined, 'x')).toThrow(expect.objectContaining({ code }));
  });

  // Both branches run in CI: the main run's Node.js 20 has no zstd decoder, the second runtime's does.
  it(`${zstdDecoderOf() ? 'takes' : 'rejects'} zstd layers on this runtime (Node.js ${process.version})`, () => {
    const body = doc({
      schemaVersion: 2,
      config,
      layers: [{ ...layer, mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd' }],
    });
    const parse = () => parseManifestDocument(body, undefined, 'x');
    if (zstdDecoderOf()) expect(parse().kind).toBe('manifest');
    else
      expect(parse).toThrow(
        expect.objectContaining({
          code: 'UNSUPPORTED',
          message: expect.stringContaining('has no zstd decoder'),
        }),
      );
  });
});

describe('selectPlatformManifest', () => {
  const index: ImageIndex = {
    kind: 'index',
    manifests: [
      entry('amd64', 'linux', undefined, d('a')),
      entry('arm', 'linux', 'v7', d('b')),
      entry('arm64', 'linux', 'v8', d('c')),
      entry('amd64', 'windows', undefined, d('e')),
      { ...entry('unknown', 'unknown', undefined, d('f')) },
    ],
  };

  it('chooses linux/<arch>', () => {
    expect(selectPlatformManifest(index, 'amd64', 'x').digest).toBe(d('a'));
    expect(selectPlatformManifest(index, 'arm64', 'x').digest).toBe(d('c'));
  });

  it('names the available platforms when none matches', () => {
    const only = { kind: 'index' as const, manifests: [entry('s390x'), entry('amd64', 'windows')] };
    try {
      selectPlatformManifest(only, 'arm64', 'x');
      expect.unreachable();
    } catch (err) {
      expect(err).toMatchObject({
        code: 'IMAGE_PULL_FAILED',
        data: { arch: 'arm64', available: ['linux/s390x', 'windows/amd64'] },
      });
    }
  });
});
