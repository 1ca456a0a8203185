/**
 * Registry calls are bounded (docs/operations.md, "Limits"): a blob longer than its descriptor
 * fails at once, a blob slower than the rate floor fails at the end of its window, and a manifest
 * that never comes fails at the call's deadline. Time is the test's clock: nothing sleeps.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentError } from '../../../../src/errors.js';
import { parseImageReference } from '../../../../src/config/image-reference.js';
import { ensureBlob } from '../../../../src/provision/oci/blob-cache.js';
import { RegistryClient } from '../../../../src/provision/oci/registry-client.js';
import { createManualClock, settle, type ManualClock } from '../../../support/manual-clock.js';

const DIGEST = `sha256:${'b'.repeat(64)}`;
let server: http.Server;
let port: number;
let handle: (req: http.IncomingMessage, res: http.ServerResponse) => void;
let dispatcher: Agent;
let clock: ManualClock;
let cacheDir: string;
let client: RegistryClient;

beforeEach(async () => {
  server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  dispatcher = new Agent({ keepAliveTimeout: 1_000 });
  clock = createManualClock();
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-oci-bounds-'));
  client = new RegistryClient(parseImageReference(`127.0.0.1:${port}/kube/node:1.34`), {
    dispatcher,
    retries: 0,
    clock,
    boundsClock: clock,
  });
});

afterEach(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await dispatcher.close();
  await rm(cacheDir, { recursive: true, force: true });
});

const failure = (p: Promise<unknown>): Promise<AgentError> =>
  p.then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err as AgentError,
  );

describe('a blob', () => {
  it('longer than its descriptor fails at once, naming URL, bytes and limit', async () => {
    let written = 0;
    handle = (_req, res) => {
      res.writeHead(200); // chunked: no Content-Length to hold undici to
      const chunk = Buffer.alloc(64 * 1024, 1);
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk)) written += chunk.length;
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    };
    const err = await failure(ensureBlob(client, { digest: DIGEST, size: 826, mediaType: 'x' }, cacheDir));
    expect(err.code).toBe('IMAGE_PULL_FAILED');
    expect(err.data).toMatchObject({ limitBytes: 826 });
    expect(err.message).toContain(`http://127.0.0.1:${port}/v2/kube/node/blobs/${DIGEST}`);
    expect(err.message).toMatch(/larger than the 826 bytes its descriptor declares \(received \d+ bytes\)/);
    expect(written).toBeLessThan(64 * 1024 * 1024);
    expect(await readdir(path.join(cacheDir, 'sha256'))).toEqual([]);
  });

  it('slower than the floor fails at the end of the rate window, naming the bytes received', async () => {
    let sent!: () => void;
    const firstByte = new Promise<void>((resolve) => (sent = resolve));
    handle = (_req, res) => {
      res.writeHead(200, { 'content-length': 1_000_000 });
      res.write(Buffer.from('x'), () => sent());
    };
    let settled = false;
    const failed = failure(
      ensureBlob(client, { digest: DIGEST, size: 1_000_000, mediaType: 'x' }, cacheDir).finally(() => {
        settled = true;
      }),
    );
    await firstByte;
    await settle(20);
    await clock.advance(59_000);
    await settle(10);
    expect(settled).toBe(false);
    await clock.advance(1_000);
    const err = await failed;
    expect(err.code).toBe('IMAGE_PULL_FAILED');
    expect(err.data).toMatchObject({ minRateBytesPerSecond: 10 * 1024, rateWindowMs: 60_000 });
    expect(err.message).toMatch(/too slow, [01] bytes in the last 1m/);
  });
});

describe('a manifest', () => {
  it('that never comes fails at the deadline of the call', async () => {
    let asked!: () => void;
    const seen = new Promise<void>((resolve) => (asked = resolve));
    handle = () => asked(); // never answers
    let settled = false;
    const failed = failure(
      client.getManifest('1.34').finally(() => {
        settled = true;
      }),
    );
    await seen;
    await clock.advance(119_000);
    await settle(10);
    expect(settled).toBe(false);
    await clock.advance(1_000);
    const err = await failed;
    expect(err.code).toBe('IMAGE_PULL_FAILED');
    expect(err.data).toMatchObject({ deadlineMs: 120_000, receivedBytes: 0 });
    expect(err.message).toContain(`/v2/kube/node/manifests/1.34`);
  });
});
