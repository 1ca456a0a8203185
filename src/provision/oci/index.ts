/** The OCI rootfs puller: what the engine uses (see each module for the details). */
export { parseImageReference, formatImageReference } from '../../config/image-reference.js';
export type { ImageReference } from '../../config/image-reference.js';
export { isPlainHttpAllowed, registryBaseUrl } from './registry-scheme.js';
export { resolveImage } from './resolve-image.js';
export type { ResolveImageOptions, ResolvedImage } from './resolve-image.js';
export { pullImage } from './pull-image.js';
export type { PullImageOptions, PullImageResult } from './pull-image.js';
export { applyLayer } from './layer/apply-layer.js';
export type { ApplyLayerOptions, ApplyStats } from './layer/apply-layer.js';
export { blobCachePath } from './blob-cache.js';
export { OCI_ARCHES } from './types.js';
export type { OciArch, OciLogger } from './types.js';
