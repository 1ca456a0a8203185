/**
 * The registry v2 subset of the local artifact mirror: any repository and any tag resolve to
 * the same generated image (`oci-image.ts`, built once on first use); manifests by tag or
 * digest and blobs by digest, `GET` and `HEAD`. Tags `missing` and `does-not-exist` are
 * unknown, so tests have an image that does not exist.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createOciImage } from './oci-image.js';
import type { OciBlob, OciImage } from './oci-image.js';

/** Optional logger (a pino logger fits). */
export interface RegistryLogger {
  debug(obj: object, msg?: string): void;
}

/** Options of `createRegistryHandler`. */
export interface RegistryHandlerOptions {
  logger?: RegistryLogger;
  /** The image to serve; default `createOciImage()`, built on the first request. */
  image?: () => OciImage;
}

/** Handles a request if it is a registry route; resolves false when the path is not under `/v2`. */
export type RegistryHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean>;

const UNKNOWN_TAGS = new Set(['missing', 'does-not-exist']);
const NAME_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const TAG_RE = /^\w[\w.-]{0,127}$/;
const DIGEST_RE = /^sha256:[a-f0-9]{64}$/;
const ROUTE_RE = /^\/v2\/(.+)\/(manifests|blobs)\/([^/]+)$/;
const TAGS_RE = /^\/v2\/(.+)\/tags\/list$/;

function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | number>,
  body: Buffer | undefined,
  head: boolean,
): void {
  res.writeHead(status, { 'docker-distribution-api-version': 'registry/2.0', ...headers });
  res.end(head ? undefined : body);
}

function registryError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  head: boolean,
  detail?: unknown,
): void {
  const body = Buffer.from(JSON.stringify({ errors: [{ code, message, detail: detail ?? null }] }));
  send(res, status, { 'content-type': 'application/json', 'content-length': body.length }, body, head);
}

function sendObject(res: ServerResponse, obj: OciBlob, contentType: string, head: boolean): void {
  const headers = {
    'content-type': contentType,
    'content-length': obj.data.length,
    'docker-content-digest': obj.digest,
    etag: `"${obj.digest}"`,
  };
  send(res, 200, headers, obj.data, head);
}

/** Create the registry route handler to mount next to the mirror's artifact routes. */
export function createRegistryHandler(options: RegistryHandlerOptions = {}): RegistryHandler {
  let image: OciImage | undefined;
  const getImage = (): OciImage => (image ??= (options.image ?? createOciImage)());

  return async (req, res, url) => {
    const { pathname } = url;
    if (pathname !== '/v2' && !pathname.startsWith('/v2/')) return false;
    const method = req.method ?? 'GET';
    const head = method === 'HEAD';
    options.logger?.debug({ method, path: pathname }, `registry request ${method} ${pathname}`);
    if (method !== 'GET' && !head) {
      res.setHeader('allow', 'GET, HEAD');
      registryError(res, 405, 'UNSUPPORTED', `${method} is not supported by this read-only registry`, false);
      return true;
    }
    if (pathname === '/v2' || pathname === '/v2/') {
      send(res, 200, { 'content-type': 'application/json', 'content-length': 2 }, Buffer.from('{}'), head);
      return true;
    }
    const tags = TAGS_RE.exec(pathname);
    if (tags?.[1] !== undefined && NAME_RE.test(tags[1])) {
      const body = Buffer.from(JSON.stringify({ name: tags[1], tags: ['latest'] }));
      send(res, 200, { 'content-type': 'application/json', 'content-length': body.length }, body, head);
      return true;
    }
    const route = ROUTE_RE.exec(pathname);
    const [, name = '', kind = '', ref = ''] = route ?? [];
    if (!route || !NAME_RE.test(name)) {
      registryError(res, 404, 'NAME_INVALID', `no registry route for ${pathname}`, head);
      return true;
    }
    if (kind === 'blobs') {
      const blob = DIGEST_RE.test(ref) ? getImage().blobs.get(ref) : undefined;
      if (!blob) registryError(res, 404, 'BLOB_UNKNOWN', 'blob unknown to registry', head, { digest: ref });
      else sendObject(res, blob, 'application/octet-stream', head);
      return true;
    }
    let manifest: OciBlob | undefined;
    if (DIGEST_RE.test(ref)) manifest = getImage().manifestsByDigest.get(ref);
    else if (TAG_RE.test(ref) && !UNKNOWN_TAGS.has(ref)) manifest = getImage().index;
    if (!manifest)
      registryError(res, 404, 'MANIFEST_UNKNOWN', 'manifest unknown', head, { name, reference: ref });
    else sendObject(res, manifest, manifest.mediaType, head);
    return true;
  };
}
