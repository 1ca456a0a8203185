/**
 * Resolving an image reference to its `linux/<arch>` manifest (manifest GETs only, no blob),
 * for preflight and as the first step of a pull.
 */
import { registryAuthFor } from './registry-auth.js';
import type { Dispatcher } from 'undici';
import { ImagePullFailedError, InvalidConfigError, UnsupportedError, describeError } from '../../errors.js';
import { DEFAULT_OCI_IMAGE } from '../../config/agent-config.js';
import type { Clock } from '../../host/types.js';
import { parseImageReference } from '../../config/image-reference.js';
import type { ImageReference } from '../../config/image-reference.js';
import { parseManifestDocument, selectPlatformManifest } from './manifest.js';
import type { ImageManifest } from './manifest.js';
import { RegistryClient } from './registry-client.js';
import { OCI_ARCHES } from './types.js';
import type { TransferLimits } from '../../outbound-http.js';
import type { OciArch, OciLogger } from './types.js';

/** The default image's GPU variant, for hosts with NVIDIA devices. */
export const DEFAULT_NVIDIA_OCI_IMAGE = DEFAULT_OCI_IMAGE.replace(
  'agent-ubuntu2404:',
  'agent-ubuntu2404-nvidia:',
);

/** What `chooseImage` decided, and why (for the log and the preflight). */
export interface ImageChoice {
  readonly ref: string;
  readonly source: 'config' | 'AGENT_OCI_IMAGE' | 'default' | 'default-nvidia';
}

/** Go's `strconv.ParseBool` truthy spellings, as upstream reads `AGENT_DISABLE_OCI_IMAGE`. */
const GO_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const GO_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

/**
 * The rootfs image in upstream's order (docs/compatibility.md, "The image order"):
 *
 * 1. the config's `OCIImage`, when it names another image than the default;
 * 2. `AGENT_DISABLE_OCI_IMAGE` truthy: upstream bootstraps Ubuntu with debootstrap, which
 *    agentd refuses (UNSUPPORTED, naming what to set instead);
 * 3. `AGENT_OCI_IMAGE`;
 * 4. the default, or its `-nvidia` variant on a host with NVIDIA devices.
 *
 * The config's schema fills in the default image when `OCIImage` is absent, so a config that
 * names exactly the default is taken as naming none. `env` is the daemon's environment.
 */
export function chooseImage(
  configImage: string,
  env: Readonly<Record<string, string | undefined>>,
  hasNvidiaDevices: boolean,
): ImageChoice {
  if (configImage !== DEFAULT_OCI_IMAGE) return { ref: configImage, source: 'config' };
  const disable = env.AGENT_DISABLE_OCI_IMAGE;
  if (disable !== undefined && disable !== '') {
    if (GO_TRUE.has(disable)) {
      throw new UnsupportedError(
        'AGENT_DISABLE_OCI_IMAGE is set: agentd builds machines only from OCI images, never with debootstrap; ' +
          "unset it, or name an image in AGENT_OCI_IMAGE or the config's OCIImage " +
          `(the default is ${hasNvidiaDevices ? DEFAULT_NVIDIA_OCI_IMAGE : DEFAULT_OCI_IMAGE})`,
        { data: { variable: 'AGENT_DISABLE_OCI_IMAGE' } },
      );
    }
    if (!GO_FALSE.has(disable)) {
      throw new InvalidConfigError(
        `AGENT_DISABLE_OCI_IMAGE: expected a boolean (1, t, true, 0, f, false…), got ${JSON.stringify(disable)}`,
      );
    }
  }
  const fromEnv = env.AGENT_OCI_IMAGE;
  if (fromEnv !== undefined && fromEnv !== '') {
    try {
      parseImageReference(fromEnv);
    } catch (err) {
      throw new InvalidConfigError(`AGENT_OCI_IMAGE: ${describeError(err)}`, {
        data: { field: 'AGENT_OCI_IMAGE', received: fromEnv },
      });
    }
    return { ref: fromEnv, source: 'AGENT_OCI_IMAGE' };
  }
  return hasNvidiaDevices
    ? { ref: DEFAULT_NVIDIA_OCI_IMAGE, source: 'default-nvidia' }
    : { ref: DEFAULT_OCI_IMAGE, source: 'default' };
}

/** Options shared by `resolveImage` and `pullImage`. */
export interface ResolveImageOptions {
  /** Which `linux/<arch>` manifest to choose from an index. */
  arch: OciArch;
  signal?: AbortSignal;
  logger?: OciLogger;
  /** Backoff timing between retries (default: the system clock). */
  clock?: Clock;
  /** Further attempts after a 5xx, 429 or connection error (default 4). */
  retries?: number;
  /** undici dispatcher (tests); default: a private Agent per call, closed afterwards. */
  dispatcher?: Dispatcher;
  /** The registry auth file (registry-auth.ts), read at each call; absent or null: anonymous. */
  registryAuthFile?: string | null;
  /** Deadline and rate floor of every registry call (default `DEFAULT_TRANSFER_LIMITS`). */
  limits?: TransferLimits;
  /** The clock the bounds are judged on (default: the system clock; `clock` times the backoff). */
  boundsClock?: Clock;
}

/** What a reference resolves to. */
export interface ResolvedImage {
  /** Digest of what the reference names (the index for a multi-platform image). */
  digest: string;
  /** Digest of the `linux/<arch>` image manifest (equals `digest` for a single-platform image). */
  manifestDigest: string;
  /** Number of layers. */
  layers: number;
  /** Sum of the (compressed) layer sizes in bytes. */
  size: number;
}

/** A resolved platform manifest (internal to the pull). */
export interface PlatformManifest {
  digest: string;
  manifestDigest: string;
  manifest: ImageManifest;
  /** True when an index chose the platform; a bare manifest's platform is checked from its config. */
  fromIndex: boolean;
}

/** Throw INVALID_CONFIG unless `options` has a valid arch and retry count. */
export function validateResolveOptions(options: ResolveImageOptions): void {
  if (!(OCI_ARCHES as readonly string[]).includes(options.arch)) {
    throw new InvalidConfigError(
      `arch: expected one of ${OCI_ARCHES.join(', ')}, got ${JSON.stringify(options.arch)}`,
    );
  }
  if (options.retries !== undefined && (!Number.isInteger(options.retries) || options.retries < 0)) {
    throw new InvalidConfigError(
      `retries: expected a non-negative integer, got ${JSON.stringify(options.retries)}`,
    );
  }
}

/** Fetch the reference's manifest and, for an index, the `linux/<arch>` manifest it lists. */
export async function resolvePlatformManifest(
  client: RegistryClient,
  ref: ImageReference,
  arch: OciArch,
): Promise<PlatformManifest> {
  const top = await client.getManifest(ref.reference);
  const doc = parseManifestDocument(top.body, top.contentType, client.label);
  if (doc.kind === 'manifest')
    return { digest: top.digest, manifestDigest: top.digest, manifest: doc, fromIndex: false };
  const chosen = selectPlatformManifest(doc, arch, client.label);
  const child = await client.getManifest(chosen.digest);
  const what = `${client.label} (linux/${arch} manifest ${chosen.digest})`;
  const childDoc = parseManifestDocument(child.body, child.contentType, what);
  if (childDoc.kind !== 'manifest')
    throw new ImagePullFailedError(`${what}: is an index inside an index, which is not supported`);
  return { digest: top.digest, manifestDigest: child.digest, manifest: childDoc, fromIndex: true };
}

/** Resolve `ref` for `linux/<arch>` without downloading any blob (preflight). */
export async function resolveImage(ref: string, options: ResolveImageOptions): Promise<ResolvedImage> {
  validateResolveOptions(options);
  const parsed = parseImageReference(ref);
  const auth = await registryAuthFor(options.registryAuthFile ?? null, parsed.registry, options.logger);
  const client = new RegistryClient(parsed, { ...options, auth });
  try {
    const resolved = await resolvePlatformManifest(client, parsed, options.arch);
    return {
      digest: resolved.digest,
      manifestDigest: resolved.manifestDigest,
      layers: resolved.manifest.layers.length,
      size: resolved.manifest.layers.reduce((n, l) => n + l.size, 0),
    };
  } finally {
    await client.close();
  }
}
