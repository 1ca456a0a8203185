/**
 * Registries in front of a simulated node's mirror: `startMirrorFront` answers what a test wants
 * (a private registry's 401, say) and passes the rest on; the holding registry holds image blob
 * downloads, so an update pulling an image through it stays in provision, deterministically,
 * until it is cancelled or the test ends.
 */
import { readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { onTestFinished } from 'vitest';
import type { SimNode } from './sim-node.js';

/**
 * A registry in front of the sim mirror on `mirrorPort`: `intercept` answers what it wants to
 * (returning true), everything else is passed on. Closed when the test ends; returns host:port.
 */
export async function startMirrorFront(
  mirrorPort: number,
  intercept: (req: http.IncomingMessage, res: http.ServerResponse) => boolean,
): Promise<string> {
  const server = http.createServer((req, res) => {
    if (intercept(req, res)) return;
    const upstream = http.request(
      { host: '127.0.0.1', port: mirrorPort, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export async function startHoldingRegistry(
  mirrorPort: number,
): Promise<{ hostPort: string; blobRequested: Promise<void> }> {
  let onBlob!: () => void;
  const blobRequested = new Promise<void>((resolve) => (onBlob = resolve));
  const hostPort = await startMirrorFront(mirrorPort, (req) => {
    if (req.method !== 'GET' || !/\/blobs\/sha256:/.test(req.url ?? '')) return false;
    onBlob();
    return true; // held: never answered
  });
  return { hostPort, blobRequested };
}

/**
 * Make the next image pull of `node` hang: a holding registry in front of its mirror, and the
 * join's cached blobs removed so the pull has to download them. Returns the image to update to.
 */
export async function holdImagePulls(
  node: SimNode,
): Promise<{ image: string; blobRequested: Promise<void> }> {
  const mirror = JSON.parse(await readFile(path.join(node.stateDir, 'sim-mirror.json'), 'utf8')) as {
    port: number;
  };
  const registry = await startHoldingRegistry(mirror.port);
  await rm(path.join(node.stateDir, 'cache', 'blobs'), { recursive: true, force: true });
  return { image: `${registry.hostPort}/agentd/sim-rootfs:v1`, blobRequested: registry.blobRequested };
}
