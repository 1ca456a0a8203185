import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WORKER_SINK_MIN_BYTES } from '../../../../src/provision/artifacts/sink.js';
import { blobCachePath, ensureBlob } from '../../../../src/provision/oci/blob-cache.js';
import type { RegistryClient } from '../../../../src/provision/oci/registry-client.js';
import type { Descriptor } from '../../../../src/provision/oci/types.js';

// Large enough to be written and hashed on the worker thread.
const blob = randomBytes(WORKER_SINK_MIN_BYTES + 1_234_567);
const digest = `sha256:${createHash('sha256').update(blob).digest('hex')}`;
const descriptor: Descriptor = {
  mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
  digest,
  size: blob.length,
};

/** A registry client whose blob body is `bytes`, in 64 KiB chunks. */
function clientServing(bytes: Buffer): RegistryClient {
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 65_536) chunks.push(bytes.subarray(i, i + 65_536));
  return {
    fetchBlob: (
      _d: Descriptor,
      consume: (body: Readable, what: string, received: (n: number) => void) => Promise<unknown>,
    ) => consume(Readable.from(chunks), 'blob test', () => undefined),
  } as unknown as RegistryClient;
}

let cacheDir: string;
beforeEach(async () => {
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-blobs-'));
});
afterEach(async () => {
  await rm(cacheDir, { recursive: true, force: true });
});

describe('ensureBlob with a large blob', () => {
  it('stores it under its digest once verified; a second call downloads nothing', async () => {
    const got = await ensureBlob(clientServing(blob), descriptor, cacheDir);
    expect(got).toEqual({ path: blobCachePath(cacheDir, digest), downloadedBytes: blob.length });
    expect((await readFile(got.path)).equals(blob)).toBe(true);
    expect(await ensureBlob(clientServing(blob), descriptor, cacheDir)).toMatchObject({ downloadedBytes: 0 });
  });

  it('a tampered body is CHECKSUM_MISMATCH and leaves no file', async () => {
    const tampered = Buffer.from(blob);
    tampered.writeUInt8(tampered.readUInt8(9_000_000) ^ 1, 9_000_000);
    await expect(ensureBlob(clientServing(tampered), descriptor, cacheDir)).rejects.toMatchObject({
      code: 'CHECKSUM_MISMATCH',
    });
    expect(await readdir(path.join(cacheDir, 'sha256'))).toEqual([]);
  });

  it('a body longer than the descriptor says is refused and leaves no file', async () => {
    const longer = Buffer.concat([blob, Buffer.from('x')]);
    await expect(ensureBlob(clientServing(longer), descriptor, cacheDir)).rejects.toMatchObject({
      code: 'IMAGE_PULL_FAILED',
    });
    expect(await readdir(path.join(cacheDir, 'sha256'))).toEqual([]);
  });
});
