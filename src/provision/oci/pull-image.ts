/**
 * `pullImage`: the OCI rootfs of a machine. Order: empty the target, resolve the `linux/<arch>`
 * manifest, download every layer into the blob cache (digest-verified, in parallel, skipped
 * when cached), then apply the layers in order. Any failure leaves the target empty.
 */
import { registryAuthFor } from './registry-auth.js';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { AgentError, ImagePullFailedError, InvalidConfigError } from '../../errors.js';
import type { ProgressSink } from '../../host/types.js';
import { ensureBlob } from './blob-cache.js';
import { emptyDirectory } from './empty-dir.js';
import { parseImageReference } from '../../config/image-reference.js';
import { applyLayer } from './layer/apply-layer.js';
import { RegistryClient } from './registry-client.js';
import { resolvePlatformManifest, validateResolveOptions } from './resolve-image.js';
import type { ResolveImageOptions } from './resolve-image.js';
import { silentLogger } from './types.js';
import type { Descriptor, OciArch } from './types.js';

/** Options of `pullImage`. */
export interface PullImageOptions extends ResolveImageOptions {
  /** Content-addressed blob cache directory (`<cacheDir>/sha256/<hex>`), shared between pulls. */
  cacheDir: string;
  progress?: ProgressSink;
  /** Layers downloaded at the same time (default 3). */
  concurrency?: number;
}

/** What a pull did. */
export interface PullImageResult {
  /** Digest of what the reference names (the index for a multi-platform image). */
  digest: string;
  /** Digest of the `linux/<arch>` image manifest that was applied. */
  manifestDigest: string;
  layers: number;
  /** Sum of the (compressed) layer sizes. */
  bytes: number;
  /** Bytes fetched from the registry (0 when every layer was cached). */
  downloadedBytes: number;
  /** File bytes written into the rootfs. */
  unpackedBytes: number;
}

const PROGRESS_STEP_BYTES = 1024 * 1024;

function validatePullOptions(options: PullImageOptions): void {
  validateResolveOptions(options);
  if (typeof options.cacheDir !== 'string' || options.cacheDir === '') {
    throw new InvalidConfigError(
      `cacheDir: expected a directory path, got ${JSON.stringify(options.cacheDir)}`,
    );
  }
  const c = options.concurrency;
  if (c !== undefined && (!Number.isInteger(c) || c < 1)) {
    throw new InvalidConfigError(`concurrency: expected a positive integer, got ${JSON.stringify(c)}`);
  }
}

/** For a single-platform image, read its config (through the cache) and check it is linux/<arch>. */
async function checkConfigPlatform(
  client: RegistryClient,
  config: Descriptor,
  cacheDir: string,
  arch: OciArch,
): Promise<number> {
  const blob = await ensureBlob(client, config, cacheDir);
  let parsed: { os?: unknown; architecture?: unknown };
  try {
    parsed = JSON.parse(await readFile(blob.path, 'utf8')) as typeof parsed;
  } catch (err) {
    throw new ImagePullFailedError(`${client.label}: image config ${config.digest} is not valid JSON`, {
      cause: err,
    });
  }
  if (parsed.os !== 'linux' || parsed.architecture !== arch) {
    throw new ImagePullFailedError(
      `${client.label}: the image is ${String(parsed.os)}/${String(parsed.architecture)}, not linux/${arch}, and has no index to choose from`,
      { data: { os: parsed.os, architecture: parsed.architecture, arch } },
    );
  }
  return blob.downloadedBytes;
}

/** Download `layers` into the cache with `concurrency` workers; returns the bytes fetched. */
async function downloadLayers(
  client: RegistryClient,
  layers: Descriptor[],
  cacheDir: string,
  concurrency: number,
  onBytes: (n: number) => void,
): Promise<number> {
  let next = 0;
  let downloaded = 0;
  let stop = false;
  const worker = async (): Promise<void> => {
    while (!stop && next < layers.length) {
      const layer = layers[next++] as Descriptor;
      try {
        // (not `downloaded += await …`: that would read `downloaded` before the other workers add to it)
        const blob = await ensureBlob(client, layer, cacheDir, onBytes);
        downloaded += blob.downloadedBytes;
      } catch (err) {
        stop = true; // the pull has failed: the other workers take no new layer
        throw err;
      }
    }
  };
  const results = await Promise.allSettled(
    Array.from({ length: Math.min(concurrency, layers.length) }, worker),
  );
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return downloaded;
}

/**
 * Pull `ref` (`linux/<arch>`) into `targetDir`: the directory is created or emptied first,
 * then filled with the image's layers. On failure it is emptied again and the error is thrown
 * (INVALID_CONFIG, IMAGE_PULL_FAILED, CHECKSUM_MISMATCH, UNSAFE_ARCHIVE, UNSUPPORTED, NO_SPACE,
 * CANCELLED). Cached layers are not downloaded again.
 */
export async function pullImage(
  ref: string,
  targetDir: string,
  options: PullImageOptions,
): Promise<PullImageResult> {
  validatePullOptions(options);
  const parsed = parseImageReference(ref);
  const target = path.resolve(targetDir);
  const cacheDir = path.resolve(options.cacheDir);
  const logger = options.logger ?? silentLogger;
  const { arch, signal, progress } = options;

  // Read before the target is touched: a broken auth file fails the pull with the host as it was.
  const auth = await registryAuthFor(options.registryAuthFile ?? null, parsed.registry, logger);
  await emptyDirectory(target);
  const client = new RegistryClient(parsed, { ...options, auth });
  try {
    const resolved = await resolvePlatformManifest(client, parsed, arch);
    const layers = resolved.manifest.layers;
    const totalBytes = layers.reduce((n, l) => n + l.size, 0);
    logger.info(
      { image: client.label, digest: resolved.digest, layers: layers.length, bytes: totalBytes },
      `pulling image ${client.label}`,
    );

    let downloadedBytes = resolved.fromIndex
      ? 0
      : await checkConfigPlatform(client, resolved.manifest.config, cacheDir, arch);
    let received = 0;
    let reported = 0;
    const task = `pull ${client.label}`;
    progress?.({ task, message: `downloading ${layers.length} layers`, bytes: 0, totalBytes });
    downloadedBytes += await downloadLayers(client, layers, cacheDir, options.concurrency ?? 3, (n) => {
      received += n;
      if (received - reported >= PROGRESS_STEP_BYTES) {
        reported = received;
        progress?.({ task, message: 'downloading', bytes: received, totalBytes });
      }
    });

    let unpackedBytes = 0;
    for (const [i, layer] of layers.entries()) {
      progress?.({
        task,
        message: `applying layer ${i + 1}/${layers.length}`,
        bytes: totalBytes,
        totalBytes,
      });
      const file = path.join(cacheDir, 'sha256', layer.digest.slice('sha256:'.length));
      const layerStream = createReadStream(file, { highWaterMark: 1024 * 1024 });
      const stats = await applyLayer(target, layerStream, { mediaType: layer.mediaType, signal });
      unpackedBytes += stats.bytes;
      logger.debug({ layer: layer.digest, ...stats }, `layer ${layer.digest} applied`);
    }
    progress?.({ task, message: 'done', bytes: totalBytes, totalBytes });
    logger.info(
      { image: client.label, digest: resolved.digest, downloadedBytes, unpackedBytes },
      `image ${client.label} pulled`,
    );
    return {
      digest: resolved.digest,
      manifestDigest: resolved.manifestDigest,
      layers: layers.length,
      bytes: totalBytes,
      downloadedBytes,
      unpackedBytes,
    };
  } catch (err) {
    // a half-applied rootfs must never be mistaken for a good one
    await emptyDirectory(target).catch((cleanupErr: unknown) =>
      logger.warn(
        { err: String(cleanupErr), target },
        'could not empty the rootfs target after a failed pull',
      ),
    );
    if (err instanceof AgentError) throw err;
    throw new ImagePullFailedError(
      `pull ${ref} into ${target}: ${err instanceof Error ? err.message : String(err)}`,
      {
        cause: err,
      },
    );
  } finally {
    await client.close();
  }
}
