/** OCI and Docker media types the puller understands, and what each layer type needs to decode. */
import * as zlib from 'node:zlib';
import type { Transform } from 'node:stream';
import { UnsupportedError } from '../../errors.js';

export const MEDIA_TYPES = {
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  ociLayer: 'application/vnd.oci.image.layer.v1.tar',
  ociLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  ociLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  dockerManifestList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  dockerLayerGzip: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
} as const;

/** The Accept header of manifest requests: indexes and manifests, OCI and Docker. */
export const MANIFEST_ACCEPT = [
  MEDIA_TYPES.ociIndex,
  MEDIA_TYPES.ociManifest,
  MEDIA_TYPES.dockerManifestList,
  MEDIA_TYPES.dockerManifest,
].join(', ');

export const INDEX_MEDIA_TYPES: ReadonlySet<string> = new Set([
  MEDIA_TYPES.ociIndex,
  MEDIA_TYPES.dockerManifestList,
]);
export const MANIFEST_MEDIA_TYPES: ReadonlySet<string> = new Set([
  MEDIA_TYPES.ociManifest,
  MEDIA_TYPES.dockerManifest,
]);

/** How a layer's bytes are compressed. */
export type LayerCompression = 'gzip' | 'none' | 'zstd';

const LAYER_COMPRESSION: ReadonlyMap<string, LayerCompression> = new Map([
  [MEDIA_TYPES.ociLayer, 'none'],
  [MEDIA_TYPES.ociLayerGzip, 'gzip'],
  [MEDIA_TYPES.ociLayerZstd, 'zstd'],
  ['application/vnd.oci.image.layer.nondistributable.v1.tar', 'none'],
  ['application/vnd.oci.image.layer.nondistributable.v1.tar+gzip', 'gzip'],
  ['application/vnd.oci.image.layer.nondistributable.v1.tar+zstd', 'zstd'],
  [MEDIA_TYPES.dockerLayerGzip, 'gzip'],
  ['application/vnd.docker.image.rootfs.foreign.diff.tar.gzip', 'gzip'],
  ['application/vnd.docker.image.rootfs.diff.tar', 'none'],
]);

/** Node's zstd decoder (Node.js 22.15 and later, so the release executable's runtime), if this runtime has one. */
export function zstdDecoderOf(z: object = zlib): ((options?: zlib.ZlibOptions) => Transform) | undefined {
  const create = (z as { createZstdDecompress?: unknown }).createZstdDecompress;
  return typeof create === 'function' ? (create as (options?: zlib.ZlibOptions) => Transform) : undefined;
}

/** The UNSUPPORTED error of a zstd layer on a runtime with no zstd decoder (`what` names the layer). */
export function noZstdDecoderError(what: string, data: Record<string, unknown> = {}): UnsupportedError {
  return new UnsupportedError(
    `${what} is zstd-compressed, and this runtime (Node.js ${process.version}) has no zstd decoder: ` +
      'run the release executable (its Node.js decodes zstd; Node.js 22.15 or later does) or publish the image with gzip layers',
    { data },
  );
}

/**
 * The compression of a layer media type that can be applied here; throws UNSUPPORTED for zstd
 * on a runtime with no zstd decoder (Node.js 20) and for media types that are not layers at all.
 */
export function layerCompression(mediaType: string): LayerCompression {
  const compression = LAYER_COMPRESSION.get(mediaType);
  if (compression === 'zstd' && !zstdDecoderOf()) {
    throw noZstdDecoderError(`layer media type ${mediaType}`, { mediaType });
  }
  if (compression === undefined) {
    throw new UnsupportedError(
      `layer media type ${JSON.stringify(mediaType)} is not a supported layer type (expected an OCI or Docker tar, tar+gzip or tar+zstd layer)`,
      { data: { mediaType } },
    );
  }
  return compression;
}

/** Guess the compression from the first bytes of a layer (gzip and zstd magic numbers). */
export function sniffCompression(head: Uint8Array): LayerCompression {
  if (head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head[0] === 0x28 && head[1] === 0xb5 && head[2] === 0x2f && head[3] === 0xfd) return 'zstd';
  return 'none';
}
