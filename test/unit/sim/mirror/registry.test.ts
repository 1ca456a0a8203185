import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOciImage, writeOciLayout } from '../../../../src/sim/mirror/oci-image.js';
import type { OciImage } from '../../../../src/sim/mirror/oci-image.js';
import { createRegistryHandler } from '../../../../src/sim/mirror/registry.js';

let server: Server;
let base: string;
let builds = 0;
let image: OciImage;

beforeAll(async () => {
  const handler = createRegistryHandler({
    image: () => {
      builds++;
      image = createOciImage();
      return image;
    },
  });
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    void handler(req, res, url).then((handled) => {
      if (!handled) res.writeHead(418).end('not a registry route');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function get(p: string, method: 'GET' | 'HEAD' | 'POST' = 'GET') {
  const res = await request(`${base}${p}`, { method });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, body };
}

const sha = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('createRegistryHandler', () => {
  it('leaves other paths to the caller', async () => {
    expect((await get('/artifacts/kubelet')).status).toBe(418);
    expect((await get('/v2x')).status).toBe(418);
  });

  it('answers the API version check', async () => {
    const res = await get('/v2/');
    expect(res.status).toBe(200);
    expect(res.headers['docker-distribution-api-version']).toBe('registry/2.0');
  });

  it('serves the image index for any repository and tag, with its digest', async () => {
    const a = await get('/v2/sim/rootfs/manifests/v1');
    const b = await get('/v2/some/other/name/manifests/1.35.0');
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toBe('application/vnd.oci.image.index.v1+json');
    expect(a.headers['docker-content-digest']).toBe(sha(a.body));
    expect(b.body.equals(a.body)).toBe(true);
    const index = JSON.parse(a.body.toString()) as {
      manifests: { platform: { os: string; architecture: string } }[];
    };
    expect(index.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`)).toEqual([
      'linux/amd64',
      'linux/arm64',
    ]);
    expect(builds).toBe(1);
  });

  it('serves manifests by digest and answers HEAD without a body', async () => {
    for (const arch of ['amd64', 'arm64'] as const) {
      const m = image.manifests[arch];
      const res = await get(`/v2/x/manifests/${m.digest}`);
      expect(res.status).toBe(200);
      expect(sha(res.body)).toBe(m.digest);
      expect(res.headers['content-type']).toBe('application/vnd.oci.image.manifest.v1+json');
      const head = await get(`/v2/x/manifests/${m.digest}`, 'HEAD');
      expect(head.status).toBe(200);
      expect(head.body.length).toBe(0);
      expect(head.headers['content-length']).toBe(String(m.data.length));
      expect(head.headers['docker-content-digest']).toBe(m.digest);
    }
  });

  it('serves every blob the manifests name, by GET and HEAD', async () => {
    for (const arch of ['amd64', 'arm64'] as const) {
      const m = JSON.parse(image.manifests[arch].data.toString()) as {
        config: { digest: string };
        layers: { digest: string; size: number }[];
      };
      for (const d of [m.config, ...m.layers]) {
        const res = await get(`/v2/x/blobs/${d.digest}`);
        expect(res.status).toBe(200);
        expect(sha(res.body)).toBe(d.digest);
        expect(res.headers['docker-content-digest']).toBe(d.digest);
        const head = await get(`/v2/x/blobs/${d.digest}`, 'HEAD');
        expect([head.status, head.body.length, head.headers['content-length']]).toEqual([
          200,
          0,
          String(res.body.length),
        ]);
      }
    }
    expect(builds).toBe(1);
  });

  it('answers registry-style 404s for unknown tags, digests and routes', async () => {
    const unknown = `sha256:${'0'.repeat(64)}`;
    const cases: [string, string][] = [
      ['/v2/sim/rootfs/manifests/missing', 'MANIFEST_UNKNOWN'],
      ['/v2/sim/rootfs/manifests/does-not-exist', 'MANIFEST_UNKNOWN'],
      [`/v2/sim/rootfs/manifests/${unknown}`, 'MANIFEST_UNKNOWN'],
      [`/v2/sim/rootfs/blobs/${unknown}`, 'BLOB_UNKNOWN'],
      ['/v2/sim/rootfs/blobs/latest', 'BLOB_UNKNOWN'],
      ['/v2/UPPER/manifests/v1', 'NAME_INVALID'],
      ['/v2/sim/rootfs/referrers/x', 'NAME_INVALID'],
    ];
    for (const [p, code] of cases) {
      const res = await get(p);
      expect([p, res.status]).toEqual([p, 404]);
      expect((JSON.parse(res.body.toString()) as { errors: { code: string }[] }).errors[0]?.code).toBe(code);
    }
    expect((await get('/v2/sim/rootfs/manifests/missing', 'HEAD')).status).toBe(404);
  });

  it('lists tags and refuses writes', async () => {
    expect(JSON.parse((await get('/v2/sim/rootfs/tags/list')).body.toString())).toEqual({
      name: 'sim/rootfs',
      tags: ['latest'],
    });
    const post = await get('/v2/sim/rootfs/blobs/uploads/', 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
  });
});

describe('createOciImage / writeOciLayout', () => {
  it('builds the same image every time and adds extra files to layer 1', () => {
    expect(createOciImage().index.digest).toBe(createOciImage().index.digest);
    const withBusybox = createOciImage({
      extraFiles: [
        { path: 'bin/busybox', content: 'ELF', mode: 0o755 },
        { path: 'bin/sh', type: 'symlink', linkTarget: 'busybox' },
      ],
    });
    expect(withBusybox.index.digest).not.toBe(createOciImage().index.digest);
  });

  it('writes an OCI image layout naming the index by tag', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-layout-'));
    try {
      const img = createOciImage();
      await writeOciLayout(dir, img, { tag: 'v9' });
      expect(JSON.parse(await readFile(path.join(dir, 'oci-layout'), 'utf8'))).toEqual({
        imageLayoutVersion: '1.0.0',
      });
      const index = JSON.parse(await readFile(path.join(dir, 'index.json'), 'utf8')) as {
        manifests: { digest: string; annotations: Record<string, string> }[];
      };
      expect(index.manifests[0]).toMatchObject({
        digest: img.index.digest,
        annotations: { 'org.opencontainers.image.ref.name': 'v9' },
      });
      const blobs = await readdir(path.join(dir, 'blobs', 'sha256'));
      expect(blobs).toHaveLength(img.blobs.size + img.manifestsByDigest.size);
      for (const name of blobs) {
        expect(sha(await readFile(path.join(dir, 'blobs', 'sha256', name)))).toBe(`sha256:${name}`);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
