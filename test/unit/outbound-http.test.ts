/**
 * agentd's outbound dispatchers under a proxy, over real HTTP: a test proxy that alone knows the
 * host names the requests use (test/support/http-proxy.ts), so an answer proves the proxy
 * carried the request.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DIRECT, proxyFromEnv } from '../../src/config/proxy.js';
import { loadUndici } from '../../src/lazy-undici.js';
import { outboundDispatcher, viaProxy } from '../../src/outbound-http.js';
import { startTestProxy, type TestProxy } from '../support/http-proxy.js';

let origin: http.Server;
let port: number;
let proxy: TestProxy;
const closers: Array<() => Promise<unknown>> = [];

beforeEach(async () => {
  origin = http.createServer((req, res) => res.end(`served ${req.url}`));
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  port = (origin.address() as AddressInfo).port;
  proxy = await startTestProxy({
    hosts: {
      [`artifacts.proxied.test:${port}`]: `127.0.0.1:${port}`,
      'secure.proxied.test:443': `127.0.0.1:${port}`,
    },
  });
});

afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
  await proxy.close();
  await new Promise((resolve) => origin.close(resolve));
});

async function get(url: string, env: NodeJS.ProcessEnv): Promise<string> {
  const dispatcher = await outboundDispatcher({ connect: { timeout: 5_000 } }, proxyFromEnv(env));
  closers.push(() => dispatcher.close());
  const { request } = await loadUndici();
  const res = await request(url, { method: 'GET', dispatcher });
  return `${res.statusCode} ${await res.body.text()}`;
}

describe('outboundDispatcher', () => {
  it('sends http URLs to HTTP_PROXY as absolute-URI requests, not through a tunnel', async () => {
    const url = `http://artifacts.proxied.test:${port}/kubelet`;
    expect(await get(url, { HTTP_PROXY: proxy.url })).toBe('200 served /kubelet');
    expect(proxy.requests).toEqual([{ method: 'GET', target: url, proxyAuthorization: undefined }]);
  });

  it('goes directly without a proxy, to NO_PROXY hosts and to loopback addresses', async () => {
    const url = `http://artifacts.proxied.test:${port}/kubelet`;
    // The name resolves nowhere: only the proxy could have answered.
    await expect(get(url, {})).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(get(url, { HTTP_PROXY: proxy.url, NO_PROXY: 'proxied.test' })).rejects.toMatchObject({
      code: 'ENOTFOUND',
    });
    expect(await get(`http://127.0.0.1:${port}/direct`, { HTTP_PROXY: proxy.url })).toBe(
      '200 served /direct',
    );
    expect(proxy.requests).toEqual([]);
  });

  it('tunnels https URLs through HTTPS_PROXY with CONNECT', async () => {
    // The tunnel reaches a plain HTTP server, so TLS fails after it: the CONNECT is what counts.
    await expect(get('https://secure.proxied.test/v2/', { HTTPS_PROXY: proxy.url })).rejects.toThrow();
    expect(proxy.requests).toEqual([
      { method: 'CONNECT', target: 'secure.proxied.test:443', proxyAuthorization: undefined },
    ]);
  });

  it('sends the credentials of the proxy URL, and fails naming the 407 of a proxy that wants others', async () => {
    await proxy.close();
    proxy = await startTestProxy({
      hosts: { [`artifacts.proxied.test:${port}`]: `127.0.0.1:${port}` },
      auth: 'u:p w',
    });
    const url = `http://artifacts.proxied.test:${port}/x`;
    const withAuth = proxy.url.replace('http://', 'http://u:p%20w@');
    expect(await get(url, { HTTP_PROXY: withAuth })).toBe('200 served /x');
    await expect(get(url, { HTTP_PROXY: proxy.url })).rejects.toThrow(
      /Proxy Authentication Required \(407\)/,
    );
    expect(proxy.requests.map((r) => r.proxyAuthorization)).toEqual([
      `Basic ${Buffer.from('u:p w').toString('base64')}`,
      undefined,
    ]);
  });

  it('names the proxy a URL goes through, for error messages, without its credentials', () => {
    const p = proxyFromEnv({ HTTPS_PROXY: 'http://u:secret@proxy.corp:3128', NO_PROXY: '.corp' });
    expect(viaProxy('https://dl.k8s.io/x', p)).toBe(' (through the proxy http://***@proxy.corp:3128)');
    expect(viaProxy('https://mirror.corp/x', p)).toBe('');
    expect(viaProxy('https://dl.k8s.io/x', DIRECT)).toBe('');
  });
});
