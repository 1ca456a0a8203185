/**
 * Install the kube/CRI/CNI binaries into a machine rootfs: per artifact, skip it when the
 * installed binary already reports the wanted version, else fetch its checksum, make sure the
 * verified file is in the content-addressed cache (downloading it on a miss), and install it
 * from there. Artifacts are processed in parallel up to `concurrency`; the first failure
 * cancels the rest and nothing partial is left in the cache or the rootfs.
 */
import { rm } from 'node:fs/promises';
import type { Dispatcher } from 'undici';
import type { AgentConfig } from '../../config/agent-config.js';
import {
  AgentError,
  CancelledError,
  ChecksumMismatchError,
  describeError,
  InvalidConfigError,
} from '../../errors.js';
import { systemClock } from '../../host/clock.js';
import type { Clock, ProgressSink } from '../../host/types.js';
import type { TransferLimits } from '../../outbound-http.js';
import { ensureCached, type CacheDeps } from './cache.js';
import { parseChecksumFile } from './checksum-file.js';
import { defaultOpenWrite } from './file-io.js';
import { DEFAULT_RETRY_POLICY, defaultArtifactDispatcher, fetchText, type HttpContext } from './http.js';
import { installFromCache } from './install-file.js';
import { resolveArtifacts } from './resolve.js';
import { runLimited } from './run-limited.js';
import type { Arch, ArtifactLogger, ArtifactName, ArtifactSpec, OpenWrite, VersionProbe } from './types.js';
import { defaultVersionProbe, isInstalled } from './version-check.js';

/** Options of `installArtifacts`; everything but `arch` and `cacheDir` has a production default. */
export interface InstallArtifactsOptions {
  arch: Arch;
  /** Root of the content-addressed cache (`<state-dir>/cache` in the daemon). */
  cacheDir: string;
  signal?: AbortSignal;
  logger?: ArtifactLogger;
  /** Receives `{ task: 'download <name>', bytes, totalBytes }`, at most ~10 per second per artifact. */
  progress?: ProgressSink;
  /** Used for backoff sleeps and progress throttling (default: the system clock). */
  clock?: Clock;
  /** Artifacts processed at once (default 4). */
  concurrency?: number;
  /** Retries after a transient failure (5xx, connection error, truncated body); default 4. */
  retries?: number;
  /** First backoff delay (default 500 ms), doubled per retry up to `maxRetryDelayMs` (default 10 s). */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
  /** Runs `<binary> --version` (default: execa, 5 s timeout, failures → null). */
  versionProbe?: VersionProbe;
  /** HTTP dispatcher (default: a shared undici Agent that follows redirects). */
  dispatcher?: Dispatcher;
  /** Test seam for file writes (ENOSPC); default `fs.createWriteStream`, fsync for rootfs files. */
  openWrite?: OpenWrite;
  /** Deadline, rate floor and size bounds of every request (default `DEFAULT_TRANSFER_LIMITS`). */
  limits?: TransferLimits;
}

/** What an install run did. */
export interface InstallArtifactsResult {
  /** Artifact bytes downloaded (checksum files not counted); 0 when everything came from the cache. */
  downloadedBytes: number;
  /** Artifacts installed from a file already in the cache. */
  cacheHits: number;
  /** Artifacts left alone because the installed binary already reports the wanted version. */
  skipped: ArtifactName[];
  /** Artifacts installed by this run. */
  installed: ArtifactName[];
  /** Retries made after transient failures. */
  retries: number;
}

type Outcome =
  { name: ArtifactName; skipped: true } | { name: ArtifactName; skipped: false; bytes: number; hit: boolean };

/**
 * Install every artifact of `config` into `rootfsDir`.
 *
 * Errors: DOWNLOAD_FAILED (HTTP status, network, truncated body, checksum file without the
 * entry), CHECKSUM_MISMATCH, NO_SPACE, UNSAFE_ARCHIVE, CANCELLED (through `signal`),
 * INVALID_CONFIG / UNSUPPORTED (from `resolveArtifacts`).
 */
export async function installArtifacts(
  config: AgentConfig,
  rootfsDir: string,
  options: InstallArtifactsOptions,
): Promise<InstallArtifactsResult> {
  const specs = resolveArtifacts(config, options.arch);
  const concurrency = options.concurrency ?? 4;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new InvalidConfigError(
      `installArtifacts concurrency: expected an integer >= 1, received ${concurrency}`,
    );
  }
  let retries = 0;
  const probe = options.versionProbe ?? defaultVersionProbe;
  const outcomes = await runLimited(specs, concurrency, options.signal, async (spec, _i, signal) => {
    const ctx: HttpContext = {
      dispatcher: options.dispatcher ?? (await defaultArtifactDispatcher()),
      clock: options.clock ?? systemClock,
      signal,
      retry: {
        retries: options.retries ?? DEFAULT_RETRY_POLICY.retries,
        baseDelayMs: options.retryDelayMs ?? DEFAULT_RETRY_POLICY.baseDelayMs,
        maxDelayMs: options.maxRetryDelayMs ?? DEFAULT_RETRY_POLICY.maxDelayMs,
      },
      onRetry: () => {
        retries++;
      },
      ...(options.limits ? { limits: options.limits } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    };
    return installOne(spec, rootfsDir, probe, {
      ctx,
      cacheDir: options.cacheDir,
      ...(options.openWrite ? { openWrite: options.openWrite } : {}),
      ...(options.progress ? { progress: options.progress } : {}),
    });
  });
  const result: InstallArtifactsResult = {
    downloadedBytes: 0,
    cacheHits: 0,
    skipped: [],
    installed: [],
    retries,
  };
  for (const o of outcomes) {
    if (o.skipped) {
      result.skipped.push(o.name);
      continue;
    }
    result.installed.push(o.name);
    result.downloadedBytes += o.bytes;
    if (o.hit) result.cacheHits++;
  }
  return result;
}

async function installOne(
  spec: ArtifactSpec,
  rootfsDir: string,
  probe: VersionProbe,
  deps: CacheDeps,
): Promise<Outcome> {
  try {
    return await installOneUnwrapped(spec, rootfsDir, probe, deps);
  } catch (err) {
    if (deps.ctx.signal.aborted) {
      throw err instanceof CancelledError
        ? err
        : new CancelledError(`install ${spec.name} ${spec.version}`, { cause: err });
    }
    if (err instanceof AgentError) throw err;
    throw new AgentError(
      'INTERNAL',
      `install ${spec.name} ${spec.version} into ${rootfsDir}: ${describeError(err)}`,
      {
        cause: err,
      },
    );
  }
}

async function installOneUnwrapped(
  spec: ArtifactSpec,
  rootfsDir: string,
  probe: VersionProbe,
  deps: CacheDeps,
): Promise<Outcome> {
  const { ctx } = deps;
  const what = `download ${spec.name} ${spec.version}`;
  if (await isInstalled(spec, rootfsDir, probe)) {
    ctx.logger?.info({ artifact: spec.name, version: spec.version }, 'artifact already installed; skipped');
    return { name: spec.name, skipped: true };
  }
  const text = await fetchText(ctx, `fetch checksum of ${spec.name} ${spec.version}`, spec.checksumUrl);
  const sha256 = parseChecksumFile(text, spec.checksumEntry, spec.checksumFormat, spec.checksumUrl);
  const request = { what, url: spec.url, sha256, task: `download ${spec.name}` };
  let cached = await ensureCached(request, deps);
  const install = { openWrite: deps.openWrite ?? defaultOpenWrite, signal: ctx.signal };
  try {
    await installFromCache(spec, cached.path, sha256, rootfsDir, install);
  } catch (err) {
    if (!(err instanceof ChecksumMismatchError) || !cached.cacheHit) throw err;
    // The cache entry was damaged on disk: drop it and download once more.
    ctx.logger?.warn(
      { artifact: spec.name, cacheFile: cached.path },
      'corrupt cache entry; downloading again',
    );
    await rm(cached.path, { force: true });
    cached = await ensureCached(request, deps);
    await installFromCache(spec, cached.path, sha256, rootfsDir, install);
  }
  ctx.logger?.info(
    {
      artifact: spec.name,
      version: spec.version,
      url: spec.url,
      bytes: cached.bytes,
      cacheHit: cached.cacheHit,
    },
    `artifact ${spec.name} ${spec.version} installed${cached.cacheHit ? ' (from the cache)' : ''}`,
  );
  return { name: spec.name, skipped: false, bytes: cached.bytes, hit: cached.cacheHit };
}
