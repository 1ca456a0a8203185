/**
 * A minimal registry v2 client on undici: manifest GETs (digest-verified), blob streams, the
 * bearer-token flow (anonymous, or with the credentials of the registry auth file) and Basic
 * auth, redirects (Authorization never leaves the registry's origin), the HTTP/HTTPS policy, and
 * retries of transient failures.
 */
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { loadUndici } from '../../lazy-undici.js';
import {
  guardTransfer,
  outboundDispatcher,
  viaProxy,
  type TransferGuard,
  type TransferLimits,
} from '../../outbound-http.js';
import { ChecksumMismatchError, ImagePullFailedError } from '../../errors.js';
import type { Clock } from '../../host/types.js';
import { systemClock } from '../../host/clock.js';
import { parseAuthChallenge } from './auth-challenge.js';
import { basicAuthorization, type RegistryAuth } from './registry-auth.js';
import { isSha256Digest, sha256Digest } from './digest.js';
import { formatImageReference } from '../../config/image-reference.js';
import type { ImageReference } from '../../config/image-reference.js';
import { MANIFEST_ACCEPT } from './media-types.js';
import { registryBaseUrl, validateRegistryUrl } from './registry-scheme.js';
import { TransientPullError, classifyRequestError, withRetries } from './retry.js';
import type { RetryOptions } from './retry.js';
import { silentLogger } from './types.js';
import type { Descriptor, OciLogger } from './types.js';

/** Collaborators and limits of a registry client; every field has a production default. */
export interface RegistryClientOptions {
  /** undici dispatcher; default: a private one under the process's proxy that `close()` shuts down. */
  dispatcher?: Dispatcher;
  signal?: AbortSignal;
  logger?: OciLogger;
  clock?: Clock;
  /** Further attempts after a transient failure (default 4). */
  retries?: number;
  /** Credentials from the registry auth file (registry-auth.ts); absent or null: anonymous, no file. */
  auth?: RegistryAuth | null;
  /** Deadline and rate floor of every call (default `DEFAULT_TRANSFER_LIMITS`). */
  limits?: TransferLimits | undefined;
  /** The clock the bounds are judged on (default: the system clock; `clock` times the backoff). */
  boundsClock?: Clock | undefined;
}

/** A manifest body as served, with the digest computed from its bytes. */
export interface FetchedManifest {
  digest: string;
  body: Buffer;
  contentType: string | undefined;
}

const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
const MAX_REDIRECTS = 5;
const REDIRECT_CODES = new Set([301, 302, 303, 307, 308]);
const USER_AGENT = 'agentd (oci-puller)';

type ResponseData = Dispatcher.ResponseData;

function header(res: ResponseData, name: string): string | undefined {
  const value = res.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Read at most `limit` bytes of a body; more is an error (a manifest never is that big). */
async function readLimited(body: Readable, limit: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > limit) {
      body.destroy();
      throw new ImagePullFailedError(`${what}: response is larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/** A short description of an error response: `HTTP 404 MANIFEST_UNKNOWN: manifest unknown`. */
async function describeFailure(res: ResponseData): Promise<string> {
  let detail = '';
  try {
    const text = (await readLimited(res.body, 16 * 1024, 'error body')).toString('utf8');
    const parsed = JSON.parse(text) as { errors?: { code?: string; message?: string }[] };
    const first = parsed.errors?.[0];
    if (first) detail = ` ${first.code ?? ''}${first.message ? `: ${first.message}` : ''}`;
  } catch {
    // not a registry JSON error: the status alone says enough
  }
  return `HTTP ${res.statusCode}${detail}`;
}

/** A client for one repository of one registry. Create one per pull and `close()` it. */
export class RegistryClient {
  readonly baseUrl: string;
  readonly label: string;
  readonly #ref: ImageReference;
  /** The caller's dispatcher, or our own Agent once the first request made it. */
  #dispatcher: Dispatcher | undefined;
  readonly #ownsDispatcher: boolean;
  readonly #signal: AbortSignal | undefined;
  readonly #logger: OciLogger;
  readonly #retry: RetryOptions;
  readonly #auth: RegistryAuth | null;
  readonly #clock: Clock;
  readonly #limits: TransferLimits | undefined;
  /** What the registry's origin is sent once a challenge was answered: `Bearer <token>` or `Basic …`. */
  #authorization: string | undefined;

  constructor(ref: ImageReference, options: RegistryClientOptions = {}) {
    this.#ref = ref;
    this.baseUrl = registryBaseUrl(ref.registry);
    this.label = formatImageReference(ref);
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher;
    this.#signal = options.signal;
    this.#logger = options.logger ?? silentLogger;
    this.#auth = options.auth ?? null;
    this.#clock = options.boundsClock ?? systemClock;
    this.#limits = options.limits;
    this.#retry = {
      retries: options.retries ?? 4,
      clock: options.clock ?? systemClock,
      signal: options.signal,
      logger: this.#logger,
    };
  }

  /**
   * GET a manifest by tag or digest. The digest is computed from the bytes: it must equal the
   * requested digest and the `Docker-Content-Digest` header when those exist (else CHECKSUM_MISMATCH).
   */
  async getManifest(reference: string): Promise<FetchedManifest> {
    const url = `${this.baseUrl}/v2/${this.#ref.repository}/manifests/${reference}`;
    const what = `${this.label}: GET ${url}`;
    return withRetries(
      what,
      async () => {
        const { res, body } = await this.#call(url, MANIFEST_ACCEPT, what, async (res) => ({
          res,
          body: await readLimited(res.body, MAX_MANIFEST_BYTES, what),
        }));
        const digest = sha256Digest(body);
        if (isSha256Digest(reference) && digest !== reference) {
          throw new ChecksumMismatchError(`${what}: manifest`, reference, digest);
        }
        const served = header(res, 'docker-content-digest');
        if (served !== undefined && isSha256Digest(served) && served !== digest) {
          throw new ChecksumMismatchError(`${what}: manifest (Docker-Content-Digest)`, served, digest);
        }
        return { digest, body, contentType: header(res, 'content-type') };
      },
      this.#retry,
    );
  }

  /**
   * GET a blob and hand its body stream to `consume`; a transient failure of the request or of
   * the stream runs the whole thing again (so `consume` must start from scratch each time).
   */
  async fetchBlob<T>(
    descriptor: Descriptor,
    consume: (body: Readable, what: string, received: (bytes: number) => void) => Promise<T>,
  ): Promise<T> {
    const url = `${this.baseUrl}/v2/${this.#ref.repository}/blobs/${descriptor.digest}`;
    const what = `${this.label}: GET ${url}`;
    return withRetries(
      what,
      () =>
        this.#call(url, '*/*', what, async (res, guard) => {
          // The descriptor's size is the limit, and its time at the floor rate extends the deadline.
          guard.startBody(descriptor.size, descriptor.size);
          try {
            return await consume(res.body, what, (n) => guard.received(n));
          } catch (err) {
            res.body.destroy();
            throw classifyRequestError(guard.failure ?? err, what, this.#signal);
          }
        }),
      this.#retry,
    );
  }

  /**
   * One call (redirects and the token flow included) under its bounds: the deadline runs from
   * its first request to the end of `use`, which reads the answer.
   */
  async #call<T>(
    url: string,
    accept: string,
    what: string,
    use: (res: ResponseData, guard: TransferGuard) => Promise<T>,
  ): Promise<T> {
    const guard = guardTransfer({
      what,
      url,
      clock: this.#clock,
      signal: this.#signal,
      limits: this.#limits,
      makeError: (message, data) => new ImagePullFailedError(message, { data }),
    });
    try {
      return await use(await this.#send(url, accept, what, guard.signal), guard);
    } catch (err) {
      throw guard.failure ?? err;
    } finally {
      guard.end();
    }
  }

  /** Release the connections of the private dispatcher (a caller's dispatcher is left open). */
  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher?.close();
  }

  /** One request with redirects and one round of the token flow; resolves only on HTTP 200. */
  async #send(start: string, accept: string, what: string, signal: AbortSignal): Promise<ResponseData> {
    let url = new URL(start);
    let authenticated = false;
    for (let hops = 0; hops <= MAX_REDIRECTS;) {
      validateRegistryUrl(url, what);
      // The token (or the credentials) are for the registry only: a redirect to a blob CDN must not carry them.
      const sameOrigin = url.origin === new URL(this.baseUrl).origin;
      const headers: Record<string, string> = { accept, 'user-agent': USER_AGENT };
      if (sameOrigin && this.#authorization) headers.authorization = this.#authorization;
      this.#logger.debug({ url: url.toString() }, `registry request GET ${url.toString()}`);
      const res = await this.#request(url, headers, what, signal);
      if (res.statusCode === 200) return res;
      if (REDIRECT_CODES.has(res.statusCode)) {
        const location = header(res, 'location');
        await res.body.dump();
        if (!location)
          throw new ImagePullFailedError(`${what}: HTTP ${res.statusCode} without a Location header`);
        url = new URL(location, url);
        hops++;
        continue;
      }
      if (res.statusCode === 401 && sameOrigin && !authenticated) {
        const challenge = header(res, 'www-authenticate');
        await res.body.dump();
        await this.#authenticate(challenge, what, signal);
        authenticated = true;
        continue;
      }
      const status = await describeFailure(res);
      const message = `${what}: ${status}${viaProxy(url)}`;
      if (res.statusCode === 429 || res.statusCode >= 500)
        throw new TransientPullError(message, { data: { status: res.statusCode } });
      if (res.statusCode === 401 || res.statusCode === 403) {
        throw new ImagePullFailedError(`${message} (${this.#whoAsked()})`, {
          data: { status: res.statusCode },
        });
      }
      throw new ImagePullFailedError(message, { data: { status: res.statusCode } });
    }
    throw new ImagePullFailedError(`${what}: more than ${MAX_REDIRECTS} redirects`);
  }

  async #request(
    url: URL,
    headers: Record<string, string>,
    what: string,
    signal: AbortSignal,
  ): Promise<ResponseData> {
    try {
      const undici = await loadUndici();
      // Made once per client; requests of one client run one after the other.
      this.#dispatcher ??= await outboundDispatcher({
        connect: { timeout: 30_000 },
        headersTimeout: 60_000,
        bodyTimeout: 120_000,
        keepAliveTimeout: 4_000,
      });
      return await undici.request(url, {
        method: 'GET',
        headers,
        dispatcher: this.#dispatcher,
        signal,
      });
    } catch (err) {
      throw classifyRequestError(err, `${what}${viaProxy(url)}`, this.#signal);
    }
  }

  /** Who the registry refused, for its 401 and 403: the credentials' user and file, or anonymous and why. */
  #whoAsked(): string {
    const ref = this.#ref;
    if (!this.#auth) return 'agentd pulled anonymously; give credentials with --registry-auth-file';
    if (!this.#auth.credentials) {
      return `agentd pulled anonymously: ${this.#auth.file} has no credentials for ${ref.registry}`;
    }
    return `as ${this.#auth.credentials.username}, the credentials for ${ref.registry} in ${this.#auth.file}`;
  }

  /**
   * Answer a 401's challenge: Basic with the credentials, or the token flow (GET
   * <realm>?service=…&scope=…, with the credentials when there are some) and keep the token for
   * this client.
   */
  async #authenticate(headerValue: string | undefined, what: string, signal: AbortSignal): Promise<void> {
    const challenge = parseAuthChallenge(headerValue);
    const credentials = this.#auth?.credentials ?? null;
    if (challenge?.scheme === 'basic') {
      if (!credentials) {
        throw new ImagePullFailedError(
          `${what}: HTTP 401: the registry asks for a user and password (${this.#whoAsked()})`,
          {
            data: { status: 401 },
          },
        );
      }
      this.#authorization = basicAuthorization(credentials);
      return;
    }
    if (challenge?.scheme !== 'bearer' || !challenge.params.realm) {
      throw new ImagePullFailedError(
        `${what}: HTTP 401 with challenge ${JSON.stringify(headerValue ?? '')}; agentd supports the Bearer token flow and Basic auth`,
      );
    }
    let realm: URL;
    try {
      realm = new URL(challenge.params.realm);
    } catch (err) {
      throw new ImagePullFailedError(
        `${what}: token realm ${JSON.stringify(challenge.params.realm)} is not a URL`,
        { cause: err },
      );
    }
    const tokenWhat = `${what}: token from ${realm.origin}${realm.pathname}`;
    validateRegistryUrl(realm, tokenWhat);
    if (challenge.params.service) realm.searchParams.set('service', challenge.params.service);
    realm.searchParams.set('scope', challenge.params.scope ?? `repository:${this.#ref.repository}:pull`);
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': USER_AGENT };
    if (credentials) {
      realm.searchParams.set('account', credentials.username);
      headers.authorization = basicAuthorization(credentials);
    }
    const res = await this.#request(realm, headers, tokenWhat, signal);
    if (res.statusCode !== 200) {
      const message = `${tokenWhat}: ${await describeFailure(res)}`;
      if (res.statusCode === 429 || res.statusCode >= 500) throw new TransientPullError(message);
      const who = res.statusCode === 401 || res.statusCode === 403 ? ` (${this.#whoAsked()})` : '';
      throw new ImagePullFailedError(`${message}${who}`, { data: { status: res.statusCode } });
    }
    const body = await readLimited(res.body, 1024 * 1024, tokenWhat);
    let token: unknown;
    try {
      const parsed = JSON.parse(body.toString('utf8')) as { token?: unknown; access_token?: unknown };
      token = parsed.token ?? parsed.access_token;
    } catch (err) {
      throw new ImagePullFailedError(`${tokenWhat}: response is not JSON`, { cause: err });
    }
    if (typeof token !== 'string' || token === '') {
      throw new ImagePullFailedError(`${tokenWhat}: response has no "token" or "access_token" string`);
    }
    this.#authorization = `Bearer ${token}`;
  }
}
