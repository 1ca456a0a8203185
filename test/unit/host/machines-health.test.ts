import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpKubeletHealthCheck } from '../../../src/host/machines-health.js';

let server: http.Server | undefined;

async function serve(status: number): Promise<string> {
  server = http.createServer((_req, res) => {
    res.statusCode = status;
    res.end(status === 200 ? 'ok' : 'unhealthy');
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/healthz`;
}

afterEach(async () => {
  if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
  server = undefined;
});

describe('createHttpKubeletHealthCheck', () => {
  it('is healthy on HTTP 200', async () => {
    const check = createHttpKubeletHealthCheck(await serve(200));
    expect(await check('kube1')).toBe(true);
  });

  it('is unhealthy on another status', async () => {
    const check = createHttpKubeletHealthCheck(await serve(500));
    expect(await check('kube1')).toBe(false);
  });

  it('is unhealthy when nothing listens', async () => {
    const url = await serve(200);
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = undefined;
    expect(await createHttpKubeletHealthCheck(url)('kube2')).toBe(false);
  });

  it('is unhealthy when the kubelet does not answer within the timeout', async () => {
    let held: http.ServerResponse | undefined;
    server = http.createServer((_req, res) => {
      held = res; // never answered
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/healthz`;
    expect(await createHttpKubeletHealthCheck(url, 100)('kube1')).toBe(false);
    held?.destroy();
    server.closeAllConnections();
  });

  it('is unhealthy when the answer is cut off mid-body', async () => {
    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-length': 100 });
      res.write('ok');
      setTimeout(() => res.destroy(), 20);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/healthz`;
    expect(await createHttpKubeletHealthCheck(url)('kube1')).toBe(false);
  });

  it('is unhealthy when cancelled', async () => {
    const check = createHttpKubeletHealthCheck(await serve(200));
    expect(await check('kube1', AbortSignal.abort())).toBe(false);
  });
});
