/**
 * The artifact half of the sim mirror: serves kube/CRI/CNI release assets and their checksum
 * files for any requested version, under the upstream URL layouts (see `artifact-routes.ts`),
 * plus large generated files for the benchmark. GET and HEAD, with Content-Length.
 *
 * Missing versions: any version whose major is `99` (e.g. `99.0.0`) does not exist and answers
 * 404, so tests can ask for a version that is not on the mirror; `missingVersionPattern`
 * replaces that rule.
 *
 * Fault hooks for tests: `faults` (a list the test may keep and change while the server runs)
 * makes matching requests fail in a chosen way a chosen number of times.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { MAX_BLOB_BYTES, blobSha256, streamBlob } from './artifact-blob.js';
import {
  MIRROR_ARCHES,
  assetContent,
  assetFileName,
  type MirrorAsset,
  type StubBehaviour,
} from './artifact-content.js';
import { MIRROR_PREFIXES, parseMirrorPath, routeVersions, type MirrorRoute } from './artifact-routes.js';

export { MIRROR_PREFIXES } from './artifact-routes.js';

/**
 * A fault injected into matching requests.
 * - `status`: answer with `status` (default 500) and no content
 * - `truncate`: send the headers with the full Content-Length, half the body, then cut the connection
 * - `reset`: cut the connection before answering
 * - `stall`: send the headers and half the body, then nothing until the client goes away
 * - `wrong-checksum`: a checksum file lists a digest of other bytes
 * - `corrupt`: an asset's body has one byte changed (same length)
 */
export interface ArtifactFault {
  /** The request path it applies to: exact string, or a pattern. */
  path: string | RegExp;
  kind: 'status' | 'truncate' | 'reset' | 'stall' | 'wrong-checksum' | 'corrupt';
  status?: number;
  /** Only this method (default: GET and HEAD). */
  method?: 'GET' | 'HEAD';
  /** How many matching requests it affects (default: all); counted down as it fires. */
  times?: number;
}

export interface ArtifactHandlerOptions {
  /** Size in bytes above which a blob is refused (default 16 GiB). */
  largeFileBytes?: number;
  /** Versions matching this do not exist (default: major version 99, `/^99\./`). */
  missingVersionPattern?: RegExp;
  /** Faults to inject; the array is read on every request, so a test may push to it later. */
  faults?: ArtifactFault[];
  /**
   * kubelet versions whose stand-in runs but never answers `/healthz` (see `StubBehaviour`):
   * a fault for tests on a real systemd host, where the stand-ins run as services.
   */
  unhealthyKubeletVersions?: RegExp;
  /** Called for every request the handler takes (after routing), e.g. to count downloads. */
  onRequest?: (info: { method: string; path: string }) => void;
}

/** Answers one request; resolves false when the path is not an artifact path (the caller tries others). */
export type ArtifactHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean>;

const DEFAULT_MISSING = /^99\./;

/** Create the handler. See the module comment for layouts, missing versions and faults. */
export function createArtifactHandler(options: ArtifactHandlerOptions = {}): ArtifactHandler {
  const missing = options.missingVersionPattern ?? DEFAULT_MISSING;
  const maxBlob = options.largeFileBytes ?? MAX_BLOB_BYTES;
  return async (req, res, url) => {
    const route = parseMirrorPath(url.pathname);
    if (!route) return false;
    const method = req.method ?? 'GET';
    options.onRequest?.({ method, path: url.pathname });
    if (method !== 'GET' && method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-length': 0 }).end();
      return true;
    }
    if (
      routeVersions(route).some((v) => missing.test(v)) ||
      (route.kind === 'blob' && route.bytes > maxBlob)
    ) {
      notFound(res, url.pathname);
      return true;
    }
    const fault = takeFault(options.faults, method, url.pathname);
    if (fault?.kind === 'status') {
      const status = fault.status ?? 500;
      res.writeHead(status, { 'content-length': 0 }).end();
      return true;
    }
    if (fault?.kind === 'reset') {
      req.socket.destroy();
      return true;
    }
    if (route.kind === 'blob') {
      await serveBlob(req, res, route, fault);
      return true;
    }
    const unhealthyKubelet = routeVersions(route).some(
      (v) => options.unhealthyKubeletVersions?.test(v) === true,
    );
    const { body, contentType } = routeBody(route, fault, { unhealthyKubelet });
    await sendBody(req, res, body, contentType, fault);
    return true;
  };
}

/**
 * The `Downloads` overrides (PascalCase, as in the agent config) that point every artifact at
 * a mirror listening at `baseUrl` (e.g. `http://127.0.0.1:39111`).
 */
export function mirrorDownloads(baseUrl: string): {
  Kubernetes: { BaseURL: string };
  Crictl: { BaseURL: string };
  Containerd: { BaseURL: string };
  Runc: { BaseURL: string };
  CNI: { BaseURL: string };
} {
  const base = baseUrl.replace(/\/+$/, '');
  return {
    Kubernetes: { BaseURL: `${base}${MIRROR_PREFIXES.Kubernetes}` },
    Crictl: { BaseURL: `${base}${MIRROR_PREFIXES.Crictl}` },
    Containerd: { BaseURL: `${base}${MIRROR_PREFIXES.Containerd}` },
    Runc: { BaseURL: `${base}${MIRROR_PREFIXES.Runc}` },
    CNI: { BaseURL: `${base}${MIRROR_PREFIXES.CNI}` },
  };
}

function takeFault(
  faults: ArtifactFault[] | undefined,
  method: string,
  pathname: string,
): ArtifactFault | undefined {
  const fault = faults?.find(
    (f) =>
      (f.method === undefined || f.method === method) &&
      (f.times === undefined || f.times > 0) &&
      (typeof f.path === 'string' ? f.path === pathname : f.path.test(pathname)),
  );
  if (fault?.times !== undefined) fault.times--;
  return fault;
}

function notFound(res: ServerResponse, pathname: string): void {
  const body = Buffer.from(`not found: ${pathname}\n`);
  res.writeHead(404, { 'content-type': 'text/plain', 'content-length': body.length }).end(body);
}

const WRONG = createHash('sha256').update('agentd mirror: wrong checksum').digest('hex');

function routeBody(
  route: Exclude<MirrorRoute, { kind: 'blob' }>,
  fault: ArtifactFault | undefined,
  behaviour: StubBehaviour,
) {
  const wrong = fault?.kind === 'wrong-checksum';
  switch (route.kind) {
    case 'asset': {
      let body = assetContent(route.asset, behaviour).bytes;
      if (fault?.kind === 'corrupt') {
        body = Buffer.from(body);
        body[body.length - 1] = (body[body.length - 1] ?? 0) ^ 0xff;
      }
      return { body, contentType: 'application/octet-stream' };
    }
    case 'checksum': {
      const hex = wrong ? WRONG : assetContent(route.asset, behaviour).sha256;
      const text = route.style === 'bare' ? hex : `${hex}  ${assetFileName(route.asset)}\n`;
      return { body: Buffer.from(text), contentType: 'text/plain' };
    }
    case 'runc-sums': {
      const lines = MIRROR_ARCHES.map((arch) => {
        const asset: MirrorAsset = { artifact: 'runc', version: route.version, arch };
        return `${wrong ? WRONG : assetContent(asset).sha256}  ${assetFileName(asset)}\n`;
      });
      return { body: Buffer.from(lines.join('')), contentType: 'text/plain' };
    }
  }
}

/** Send `body`, honouring HEAD and the body-shaping faults (truncate, stall). */
async function sendBody(
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer,
  contentType: string,
  fault: ArtifactFault | undefined,
): Promise<void> {
  res.writeHead(200, { 'content-type': contentType, 'content-length': body.length });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  if (fault?.kind === 'truncate' || fault?.kind === 'stall') {
    const partial = body.subarray(0, Math.floor(body.length / 2));
    await new Promise<void>((resolve) => res.write(partial, () => resolve()));
    await cutOrStall(req, res, fault.kind);
    return;
  }
  res.end(body);
}

async function serveBlob(
  req: IncomingMessage,
  res: ServerResponse,
  route: Extract<MirrorRoute, { kind: 'blob' }>,
  fault: ArtifactFault | undefined,
): Promise<void> {
  if (route.checksum) {
    const hex = fault?.kind === 'wrong-checksum' ? WRONG : await blobSha256(route.bytes);
    await sendBody(req, res, Buffer.from(`${hex}  blob-${route.bytes}.bin\n`), 'text/plain', undefined);
    return;
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': route.bytes });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  if (fault?.kind === 'truncate' || fault?.kind === 'stall') {
    await streamBlob(res, route.bytes, Math.floor(route.bytes / 2));
    await cutOrStall(req, res, fault.kind);
    return;
  }
  await streamBlob(res, route.bytes);
  res.end();
}

/** After a partial body: cut the connection (truncate), or wait until the client gives up (stall). */
async function cutOrStall(
  req: IncomingMessage,
  res: ServerResponse,
  kind: 'truncate' | 'stall',
): Promise<void> {
  if (kind === 'truncate') {
    // Let the partial body leave before the socket goes, so the client sees a short body.
    await new Promise<void>((resolve) => setImmediate(resolve));
    req.socket.destroy();
    return;
  }
  if (res.destroyed) return;
  await new Promise<void>((resolve) => res.once('close', resolve));
}
