/** Redirect loops and over-long chains are "too many redirects from <url>", not undici's internals. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentError } from '../../../../src/errors.js';
import {
  defaultArtifactDispatcher,
  fetchText,
  MAX_REDIRECTS,
} from '../../../../src/provision/artifacts/http.js';
import { fakeClock } from './helpers.js';

let server: http.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

async function serve(handler: http.RequestListener): Promise<string> {
  server = http.createServer(handler);
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function fetchFailure(url: string): Promise<AgentError> {
  const ctx = {
    dispatcher: await defaultArtifactDispatcher(),
    clock: fakeClock().clock,
    signal: new AbortController().signal,
    retry: { retries: 0, baseDelayMs: 1, maxDelayMs: 1 },
  };
  return fetchText(ctx, 'fetch checksum of kubelet 1.34.0', url).then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err as AgentError,
  );
}

describe('redirects', () => {
  it('a loop is "too many redirects from <url>"', async () => {
    const base = await serve((_req, res) => res.writeHead(302, { location: '/loop' }).end());
    const err = await fetchFailure(`${base}/loop`);
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.message).toBe(
      `fetch checksum of kubelet 1.34.0: too many redirects from ${base}/loop (a loop, or more than ${MAX_REDIRECTS})`,
    );
    expect(err.message).not.toMatch(/Agent|cross-origin/);
  });

  it('a chain longer than the limit says the same', async () => {
    const base = await serve((req, res) => {
      const n = Number(req.url?.slice(1) ?? 0);
      res.writeHead(302, { location: `/${n + 1}` }).end();
    });
    const err = await fetchFailure(`${base}/0`);
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.message).toContain(`too many redirects from ${base}/0`);
  });
});
