/**
 * The local artifact mirror of `--sim` and the tests: kube/CRI/CNI artifacts and a small OCI
 * image through the registry v2 API, on 127.0.0.1 only, in one node:http server.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createArtifactHandler, type ArtifactHandlerOptions } from './artifacts.js';
import type { OciImage } from './oci-image.js';
import { createRegistryHandler } from './registry.js';

export { mirrorDownloads } from './artifacts.js';

export interface Mirror {
  url: string;
  /** `127.0.0.1:<port>`, the registry host of the mirror's image references. */
  hostPort: string;
  port: number;
  close(): Promise<void>;
}

export interface MirrorOptions {
  /** Port to listen on (0: any free one). */
  port?: number;
  logger?: Logger;
  artifacts?: ArtifactHandlerOptions;
  /** The image every registry tag resolves to (default: `createOciImage()`), e.g. one with busybox. */
  image?: () => OciImage;
}

export async function startMirror(options: MirrorOptions = {}): Promise<Mirror> {
  const artifacts = createArtifactHandler(options.artifacts);
  const registry = createRegistryHandler({
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.image ? { image: options.image } : {}),
  });
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    void (async () => {
      try {
        if (await artifacts(req, res, url)) return;
        if (await registry(req, res, url)) return;
        res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${url.pathname}\n`);
      } catch (err) {
        options.logger?.error({ err, url: url.pathname }, 'mirror request failed');
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    hostPort: `127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
