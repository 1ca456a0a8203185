/**
 * Reading registry manifests: validate the JSON (zod), tell an index from an image manifest,
 * and choose the `linux/<arch>` manifest from an index.
 */
import * as z from 'zod';
import { ImagePullFailedError, UnsupportedError } from '../../errors.js';
import { isSha256Digest } from './digest.js';
import { INDEX_MEDIA_TYPES, MANIFEST_MEDIA_TYPES, layerCompression } from './media-types.js';
import type { Descriptor, OciArch } from './types.js';

const digestSchema = z.string().refine(isSha256Digest, { message: 'expected sha256:<64 lowercase hex>' });

const descriptorSchema = z.object({
  mediaType: z.string().min(1),
  digest: digestSchema,
  size: z.number().int().nonnegative(),
  platform: z.object({ architecture: z.string(), os: z.string(), variant: z.string().optional() }).optional(),
});

const indexSchema = z.object({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  manifests: z.array(descriptorSchema),
});

const manifestSchema = z.object({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  config: descriptorSchema,
  layers: z.array(descriptorSchema).min(1),
});

/** An image index (OCI index or Docker manifest list). */
export interface ImageIndex {
  kind: 'index';
  manifests: Descriptor[];
}

/** An image manifest (OCI or Docker v2 schema 2). */
export interface ImageManifest {
  kind: 'manifest';
  config: Descriptor;
  layers: Descriptor[];
}

/**
 * Parse a manifest body. `contentType` is the response's Content-Type; the body's own
 * `mediaType` wins when present. Throws IMAGE_PULL_FAILED for anything that is not a valid
 * index or schema-2 manifest, and UNSUPPORTED for layers this build cannot apply.
 */
export function parseManifestDocument(
  body: Buffer,
  contentType: string | undefined,
  what: string,
): ImageIndex | ImageManifest {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new ImagePullFailedError(`${what}: manifest is not valid JSON`, { cause: err });
  }
  const doc = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  if (doc.schemaVersion === 1) {
    throw new UnsupportedError(
      `${what}: Docker schema 1 manifests are not supported; push the image with a schema 2 or OCI manifest`,
    );
  }
  // The body's own mediaType is authoritative; the Content-Type header only fills in for OCI
  // documents that omit it, and the shape decides when neither says anything useful.
  const declared = typeof doc.mediaType === 'string' ? doc.mediaType : undefined;
  if (declared !== undefined && !INDEX_MEDIA_TYPES.has(declared) && !MANIFEST_MEDIA_TYPES.has(declared)) {
    throw new UnsupportedError(
      `${what}: manifest media type ${JSON.stringify(declared)} is not supported (expected an OCI index/manifest or a Docker manifest list/v2 manifest)`,
      { data: { mediaType: declared } },
    );
  }
  const mediaType = declared ?? contentType?.split(';')[0]?.trim();
  const isIndex = mediaType !== undefined && INDEX_MEDIA_TYPES.has(mediaType);
  const isManifest = mediaType !== undefined && MANIFEST_MEDIA_TYPES.has(mediaType);
  const looksLikeIndex = Array.isArray(doc.manifests);
  if (isIndex || (!isManifest && looksLikeIndex)) {
    const parsed = indexSchema.safeParse(json);
    if (!parsed.success) throw invalidDocument(what, 'index', parsed.error);
    return { kind: 'index', manifests: parsed.data.manifests };
  }
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success) throw invalidDocument(what, 'manifest', parsed.error);
  for (const layer of parsed.data.layers) layerCompression(layer.mediaType);
  return { kind: 'manifest', config: parsed.data.config, layers: parsed.data.layers };
}

function invalidDocument(what: string, kind: string, error: z.ZodError): ImagePullFailedError {
  const issues = error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
  return new ImagePullFailedError(`${what}: invalid image ${kind}: ${issues}`, {
    data: { issues: error.issues },
  });
}

function platformName(d: Descriptor): string {
  const p = d.platform;
  if (!p) return 'unknown';
  return p.variant ? `${p.os}/${p.architecture}/${p.variant}` : `${p.os}/${p.architecture}`;
}

/**
 * The `linux/<arch>` manifest of an index (arm64 prefers no variant or `v8`). Throws
 * IMAGE_PULL_FAILED naming the platforms the index offers when none matches.
 */
export function selectPlatformManifest(index: ImageIndex, arch: OciArch, what: string): Descriptor {
  const candidates = index.manifests.filter(
    (d) =>
      d.platform?.os === 'linux' && d.platform.architecture === arch && MANIFEST_MEDIA_TYPES.has(d.mediaType),
  );
  const preferred = candidates.find(
    (d) => !d.platform?.variant || (arch === 'arm64' && d.platform.variant === 'v8'),
  );
  const chosen = preferred ?? candidates[0];
  if (chosen) return chosen;
  const available = [...new Set(index.manifests.map(platformName))].join(', ') || 'none';
  throw new ImagePullFailedError(
    `${what}: the image has no linux/${arch} manifest (platforms available: ${available})`,
    {
      data: { arch, available: index.manifests.map(platformName) },
    },
  );
}
