/** Preflight for artifacts: a HEAD of every artifact URL and its checksum URL, nothing downloaded. */
import type { Dispatcher } from 'undici';
import type { AgentConfig } from '../../config/agent-config.js';
import { redactText } from '../../config/redact.js';
import { describeError } from '../../errors.js';
import { systemClock } from '../../host/clock.js';
import type { Clock } from '../../host/types.js';
import type { TransferLimits } from '../../outbound-http.js';
import {
  contentLength,
  defaultArtifactDispatcher,
  send,
  statusError,
  withRetries,
  type HttpContext,
} from './http.js';
import { resolveArtifacts } from './resolve.js';
import { runLimited } from './run-limited.js';
import type { Arch, ArtifactSpec } from './types.js';

/** One preflight check result (the shape of the `preflight` method's `checks`). */
export interface ArtifactCheck {
  /** `artifact:<name>`, e.g. `artifact:kubelet`. */
  name: string;
  ok: boolean;
  message: string;
}

export interface CheckArtifactsOptions {
  signal?: AbortSignal;
  /** Retries on 5xx/connection errors (default 1; preflight should be quick). */
  retries?: number;
  clock?: Clock;
  dispatcher?: Dispatcher;
  concurrency?: number;
  /** Deadline of every HEAD (default `DEFAULT_TRANSFER_LIMITS`). */
  limits?: TransferLimits;
}

/**
 * HEAD every artifact URL of `config` on `arch` and its checksum URL. Never throws for an
 * unreachable URL (that is a failed check); throws INVALID_CONFIG / UNSUPPORTED when the
 * config cannot be resolved to URLs at all, and CANCELLED when `signal` aborts.
 */
export async function checkArtifacts(
  config: AgentConfig,
  arch: Arch,
  options: CheckArtifactsOptions = {},
): Promise<ArtifactCheck[]> {
  const specs = resolveArtifacts(config, arch);
  return runLimited(specs, options.concurrency ?? 8, options.signal, async (spec, _i, signal) => {
    const ctx: HttpContext = {
      dispatcher: options.dispatcher ?? (await defaultArtifactDispatcher()),
      clock: options.clock ?? systemClock,
      signal,
      retry: { retries: options.retries ?? 1, baseDelayMs: 500, maxDelayMs: 2_000 },
      ...(options.limits ? { limits: options.limits } : {}),
    };
    return checkOne(ctx, spec, options.signal);
  });
}

async function checkOne(
  ctx: HttpContext,
  spec: ArtifactSpec,
  outer: AbortSignal | undefined,
): Promise<ArtifactCheck> {
  const name = `artifact:${spec.name}`;
  try {
    const size = await head(ctx, `check ${spec.name} ${spec.version}`, spec.url);
    await head(ctx, `check checksum of ${spec.name} ${spec.version}`, spec.checksumUrl);
    const sizeText = size === undefined ? '' : `, ${size} bytes`;
    return {
      name,
      ok: true,
      // A check's words are shown (preflight, the operation record): URLs without their credentials.
      message: redactText(
        `${spec.name} ${spec.version}: ${spec.url} reachable${sizeText}; checksum ${spec.checksumUrl} reachable`,
      ),
    };
  } catch (err) {
    // Only the caller's cancellation is an error; everything else is a failed check.
    if (outer?.aborted) throw err;
    return { name, ok: false, message: describeError(err) };
  }
}

async function head(ctx: HttpContext, what: string, url: string): Promise<number | undefined> {
  return withRetries(ctx, what, url, async () => {
    return send(ctx, 'HEAD', url, what, async (res) => {
      await res.body.dump();
      if (res.statusCode < 200 || res.statusCode >= 300) throw statusError(what, 'HEAD', url, res.statusCode);
      return contentLength(res);
    });
  });
}
