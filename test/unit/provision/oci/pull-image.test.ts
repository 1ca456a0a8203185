import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockAgent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../../../src/host/types.js';
import { pullImage, resolveImage } from '../../../../src/provision/oci/index.js';
import { createOciImage } from '../../../../src/sim/mirror/oci-image.js';
import type { OciBlob, OciImage } from '../../../../src/sim/mirror/oci-image.js';
import { createRegistryHandler } from '../../../../src/sim/mirror/registry.js';
import { buildTarGz } from '../../../../src/sim/mirror/tar-build.js';
import { expectBackoff } from '../../../support/backoff.js';

type Route = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<boolean> | boolean;

/** One 127.0.0.1 server per test file; each test installs its routes and reads the request log. */
let server: Server;
let port: number;
let routes: Route[] = [];
let requests: { method: string; path: string; authorization?: string }[] = [];

const image = createOciImage();
const registry = createRegistryHandler({ image: () => image });

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    requests.push({ method: req.method ?? '', path: url.pathname, authorization: req.headers.authorization });
    void (async () => {
      for (const route of routes) if (await route(req, res, url)) return;
      res.writeHead(404).end();
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

let dir: string;
let target: string;
let cacheDir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-pull-'));
  target = path.join(dir, 'machines', 'kube1');
  cacheDir = path.join(dir, 'cache');
  routes = [registry];
  requests = [];
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const ref = (tag = 'v1', repo = 'sim/rootfs'): string => `127.0.0.1:${port}/${repo}:${tag}`;

/** A clock whose sleeps only record their length. */
function fakeClock(): Clock & { sleeps: number[] } {
  let now = 0;
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => now,
    sleep: async (ms: number) => {
      sleeps.push(ms);
      now += ms;
    },
  };
}

async function codeOf(p: Promise<unknown>): Promise<{ code: string; data?: Record<string, unknown> }> {
  try {
    await p;
  } catch (err) {
    const e = err as { code?: string; data?: Record<string, unknown> };
    return { code: e.code ?? 'NO_CODE', data: e.data };
  }
  return { code: 'RESOLVED' };
}

const layerDigests = (arch: 'amd64' | 'arm64'): string[] =>
  (JSON.parse(image.manifests[arch].data.toString()) as { layers: { digest: string }[] }).layers.map(
    (l) => l.digest,
  );
const blobRequests = (): number => requests.filter((r) => r.path.includes('/blobs/')).length;

async function expectSimTree(arch: string): Promise<void> {
  expect(await readFile(path.join(target, 'etc/os-release'), 'utf8')).toContain('ID=agentd-sim');
  expect(await readFile(path.join(target, 'etc/hostname'), 'utf8')).toBe('sim-rootfs\n');
  expect(await readFile(path.join(target, 'etc/agentd-image-arch'), 'utf8')).toBe(`${arch}\n`);
  for (const d of ['usr/local/bin', 'opt/cni/bin', 'var/lib/kubelet', 'etc/systemd/system', 'bin']) {
    expect(await readdir(path.join(target, d))).toBeInstanceOf(Array);
  }
  // layer 2's whiteout and opaque directory
  expect((await readdir(path.join(target, 'etc'))).sort()).toEqual([
    'agentd-image-arch',
    'hostname',
    'os-release',
    'systemd',
  ]);
  expect(await readdir(path.join(target, 'opt/legacy'))).toEqual(['new.conf']);
}

describe('pullImage from the sim registry', () => {
  it.each(['amd64', 'arm64'] as const)('pulls linux/%s', async (arch) => {
    const result = await pullImage(ref(), target, { arch, cacheDir, clock: fakeClock() });
    const layers = layerDigests(arch).map((d) => image.blobs.get(d) as OciBlob);
    const bytes = layers.reduce((n, l) => n + l.data.length, 0);
    expect(result).toMatchObject({
      digest: image.index.digest,
      manifestDigest: image.manifests[arch].digest,
      layers: 2,
      bytes,
      downloadedBytes: bytes,
    });
    await expectSimTree(arch);
    for (const d of layerDigests(arch)) {
      const cached = await readFile(path.join(cacheDir, 'sha256', d.slice(7)));
      expect(`sha256:${createHash('sha256').update(cached).digest('hex')}`).toBe(d);
    }
  });

  it('reuses the blob cache: a second pull downloads no layer bytes, and it empties the target first', async () => {
    await pullImage(ref(), target, { arch: 'amd64', cacheDir });
    await writeFile(path.join(target, 'stray'), 'left from an earlier machine');
    requests = [];
    const again = await pullImage(ref(), target, { arch: 'amd64', cacheDir });
    expect(again.downloadedBytes).toBe(0);
    expect(blobRequests()).toBe(0);
    await expectSimTree('amd64');
    expect(await readdir(target)).not.toContain('stray');
    // the other arch shares layer 1: only its own layer 2 is fetched
    requests = [];
    const other = await pullImage(ref(), path.join(dir, 'kube2'), { arch: 'arm64', cacheDir });
    expect(blobRequests()).toBe(1);
    expect(other.downloadedBytes).toBe(image.blobs.get(layerDigests('arm64')[1]!)!.data.length);
  });

  it('resolves without downloading blobs', async () => {
    const resolved = await resolveImage(ref(), { arch: 'arm64' });
    const sizes = layerDigests('arm64').map((d) => image.blobs.get(d)!.data.length);
    expect(resolved).toEqual({
      digest: image.index.digest,
      manifestDigest: image.manifests.arm64.digest,
      layers: 2,
      size: sizes[0]! + sizes[1]!,
    });
    expect(blobRequests()).toBe(0);
    expect(requests.map((r) => r.path)).toEqual([
      `/v2/sim/rootfs/manifests/v1`,
      `/v2/sim/rootfs/manifests/${image.manifests.arm64.digest}`,
    ]);
  });

  it('pulls by digest', async () => {
    const result = await pullImage(`127.0.0.1:${port}/sim/rootfs@${image.index.digest}`, target, {
      arch: 'amd64',
      cacheDir,
    });
    expect(result.digest).toBe(image.index.digest);
  });

  it('fails with IMAGE_PULL_FAILED for an unknown tag, without retrying', async () => {
    const clock = fakeClock();
    expect((await codeOf(pullImage(ref('missing'), target, { arch: 'amd64', cacheDir, clock }))).code).toBe(
      'IMAGE_PULL_FAILED',
    );
    expect(clock.sleeps).toEqual([]);
    expect(await readdir(target)).toEqual([]);
    expect((await codeOf(resolveImage(ref('does-not-exist'), { arch: 'amd64' }))).code).toBe(
      'IMAGE_PULL_FAILED',
    );
  });

  it('rejects bad input with INVALID_CONFIG before any request', async () => {
    expect((await codeOf(pullImage('Not A Ref', target, { arch: 'amd64', cacheDir }))).code).toBe(
      'INVALID_CONFIG',
    );
    const badArch = { arch: 's390x' as 'amd64', cacheDir };
    expect((await codeOf(pullImage(ref(), target, badArch))).code).toBe('INVALID_CONFIG');
    expect((await codeOf(pullImage(ref(), target, { arch: 'amd64', cacheDir: '' }))).code).toBe(
      'INVALID_CONFIG',
    );
    expect((await codeOf(resolveImage(ref(), { arch: 'amd64', retries: -1 }))).code).toBe('INVALID_CONFIG');
    expect(requests).toEqual([]);
  });

  it('stops with CANCELLED when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const result = await codeOf(
      pullImage(ref(), target, { arch: 'amd64', cacheDir, signal: controller.signal }),
    );
    expect(result.code).toBe('CANCELLED');
  });
});

describe('pullImage integrity', () => {
  it('fails with CHECKSUM_MISMATCH on a tampered blob and leaves nothing in the target or the cache', async () => {
    const victim = layerDigests('amd64')[1]!;
    routes = [
      (req, res, url) => {
        if (!url.pathname.endsWith(`/blobs/${victim}`)) return false;
        const data = Buffer.from(image.blobs.get(victim)!.data);
        data[data.length - 10] = (data[data.length - 10] ?? 0) ^ 0xff;
        res.writeHead(200, { 'content-length': data.length }).end(data);
        return true;
      },
      registry,
    ];
    await mkdir(target, { recursive: true });
    await writeFile(path.join(target, 'old'), 'old rootfs');
    const clock = fakeClock();
    const result = await codeOf(pullImage(ref(), target, { arch: 'amd64', cacheDir, clock }));
    expect(result.code).toBe('CHECKSUM_MISMATCH');
    expect(clock.sleeps).toEqual([]); // a mismatch is not retried
    expect(await readdir(target)).toEqual([]);
    const cached = await readdir(path.join(cacheDir, 'sha256'));
    expect(cached).not.toContain(victim.slice(7));
    expect(cached.filter((f) => f.startsWith('.tmp-'))).toEqual([]);
  });

  it('fails with CHECKSUM_MISMATCH when the manifest does not match its digest', async () => {
    routes = [
      (_req, res, url) => {
        if (!url.pathname.endsWith(`/manifests/${image.manifests.amd64.digest}`)) return false;
        const body = Buffer.from(
          image.manifests.amd64.data.toString().replace('"schemaVersion":2', '"schemaVersion": 2'),
        );
        res.writeHead(200, { 'content-type': image.manifests.amd64.mediaType }).end(body);
        return true;
      },
      registry,
    ];
    expect((await codeOf(pullImage(ref(), target, { arch: 'amd64', cacheDir }))).code).toBe(
      'CHECKSUM_MISMATCH',
    );
  });

  it('fails with IMAGE_PULL_FAILED naming the platforms when the index has no linux/<arch>', async () => {
    const index = JSON.parse(image.index.data.toString()) as {
      manifests: { platform: { architecture: string } }[];
    };
    index.manifests[0]!.platform.architecture = 'ppc64le';
    index.manifests.splice(1, 1);
    const data = Buffer.from(JSON.stringify(index));
    const only: OciImage = {
      ...image,
      index: { ...image.index, data, digest: `sha256:${createHash('sha256').update(data).digest('hex')}` },
    };
    routes = [createRegistryHandler({ image: () => only })];
    const result = await codeOf(pullImage(ref(), target, { arch: 'arm64', cacheDir }));
    expect(result).toEqual({
      code: 'IMAGE_PULL_FAILED',
      data: { arch: 'arm64', available: ['linux/ppc64le'] },
    });
    expect(blobRequests()).toBe(0);
  });

  it('checks the config of a single-platform image against the wanted arch', async () => {
    const amd64Only: OciImage = { ...image, index: image.manifests.amd64 };
    routes = [createRegistryHandler({ image: () => amd64Only })];
    expect((await codeOf(pullImage(ref(), target, { arch: 'arm64', cacheDir }))).code).toBe(
      'IMAGE_PULL_FAILED',
    );
    const ok = await pullImage(ref(), target, { arch: 'amd64', cacheDir });
    expect(ok.digest).toBe(image.manifests.amd64.digest);
    await expectSimTree('amd64');
  });

  it('fails with UNSAFE_ARCHIVE for a hostile layer and empties the target', async () => {
    const evil: OciBlob = (() => {
      const data = buildTarGz([
        { path: 'etc/ok', content: 'fine' },
        { path: '../escape', content: 'x' },
      ]);
      return {
        mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
        data,
        digest: `sha256:${createHash('sha256').update(data).digest('hex')}`,
      };
    })();
    const manifest = JSON.parse(image.manifests.amd64.data.toString()) as { layers: unknown[] };
    manifest.layers.push({ mediaType: evil.mediaType, digest: evil.digest, size: evil.data.length });
    const mdata = Buffer.from(JSON.stringify(manifest));
    const mblob = {
      ...image.manifests.amd64,
      data: mdata,
      digest: `sha256:${createHash('sha256').update(mdata).digest('hex')}`,
    };
    const hostile: OciImage = {
      ...image,
      index: mblob,
      blobs: new Map([...image.blobs, [evil.digest, evil]]),
    };
    routes = [createRegistryHandler({ image: () => hostile })];
    expect((await codeOf(pullImage(ref(), target, { arch: 'amd64', cacheDir }))).code).toBe('UNSAFE_ARCHIVE');
    expect(await readdir(target)).toEqual([]);
    expect(await readdir(dir)).not.toContain('escape');
  });
});

describe('pullImage transport', () => {
  it('retries 5xx answers with capped backoff on the injected clock', async () => {
    let failures = 3;
    routes = [
      (_req, res, url) => {
        if (!url.pathname.includes('/manifests/') || failures <= 0) return false;
        failures--;
        res.writeHead(503).end();
        return true;
      },
      registry,
    ];
    const clock = fakeClock();
    await pullImage(ref(), target, { arch: 'amd64', cacheDir, clock });
    expectBackoff(clock.sleeps, [500, 1000, 2000]);
    await expectSimTree('amd64');
  });

  it('gives up after the configured retries', async () => {
    routes = [
      (_req, res) => {
        res.writeHead(502).end();
        return true;
      },
    ];
    const clock = fakeClock();
    expect(
      (await codeOf(pullImage(ref(), target, { arch: 'amd64', cacheDir, clock, retries: 2 }))).code,
    ).toBe('IMAGE_PULL_FAILED');
    expectBackoff(clock.sleeps, [500, 1000]);
    expect(requests).toHaveLength(3);
  });

  it('retries a blob whose connection drops mid-body', async () => {
    const victim = layerDigests('amd64')[0]!;
    let drops = 1;
    routes = [
      (_req, res, url) => {
        if (!url.pathname.endsWith(`/blobs/${victim}`) || drops <= 0) return false;
        drops--;
        const data = image.blobs.get(victim)!.data;
        res.writeHead(200, { 'content-length': data.length });
        res.write(data.subarray(0, 100), () => res.destroy());
        return true;
      },
      registry,
    ];
    const clock = fakeClock();
    const result = await pullImage(ref(), target, { arch: 'amd64', cacheDir, clock });
    expectBackoff(clock.sleeps, [500]);
    expect(result.layers).toBe(2);
    await expectSimTree('amd64');
  });

  it('retries when nothing listens, then fails with IMAGE_PULL_FAILED', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const clock = fakeClock();
    const result = await codeOf(
      pullImage(`127.0.0.1:${deadPort}/x:y`, target, { arch: 'amd64', cacheDir, clock, retries: 1 }),
    );
    expect(result.code).toBe('IMAGE_PULL_FAILED');
    expectBackoff(clock.sleeps, [500]);
  });

  it('follows the anonymous bearer-token flow, and keeps the token from other origins on redirects', async () => {
    const cdn = createServer((req, res) => {
      cdnAuth.push(req.headers.authorization);
      const digest = (req.url ?? '').split('/').pop() ?? '';
      const blob = image.blobs.get(digest);
      if (!blob) res.writeHead(404).end();
      else res.writeHead(200, { 'content-length': blob.data.length }).end(blob.data);
    });
    const cdnAuth: (string | undefined)[] = [];
    await new Promise<void>((resolve) => cdn.listen(0, '127.0.0.2', resolve));
    const cdnPort = (cdn.address() as AddressInfo).port;
    const tokenQueries: string[] = [];
    routes = [
      (_req, res, url) => {
        if (url.pathname !== '/token') return false;
        tokenQueries.push(url.search);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: 's3cret' }));
        return true;
      },
      (req, res, url) => {
        if (req.headers.authorization === 'Bearer s3cret') return false;
        res.writeHead(401, {
          'www-authenticate': `Bearer realm="http://127.0.0.1:${port}/token",service="sim-registry",scope="repository:sim/rootfs:pull"`,
          'content-type': 'application/json',
        });
        res.end(
          JSON.stringify({
            errors: [{ code: 'UNAUTHORIZED', message: `auth required for ${url.pathname}` }],
          }),
        );
        return true;
      },
      (_req, res, url) => {
        if (!url.pathname.includes('/blobs/')) return false;
        res
          .writeHead(307, { location: `http://127.0.0.2:${cdnPort}/cdn/${url.pathname.split('/').pop()}` })
          .end();
        return true;
      },
      registry,
    ];
    try {
      const result = await pullImage(ref(), target, { arch: 'amd64', cacheDir });
      expect(result.layers).toBe(2);
      await expectSimTree('amd64');
      expect(tokenQueries).toEqual([
        `?service=sim-registry&scope=${encodeURIComponent('repository:sim/rootfs:pull')}`,
      ]);
      expect(
        requests.filter((r) => r.path.startsWith('/v2/') && r.authorization === 'Bearer s3cret').length,
      ).toBeGreaterThanOrEqual(4);
      expect(cdnAuth).toEqual([undefined, undefined]);
    } finally {
      await new Promise<void>((resolve) => cdn.close(() => resolve()));
    }
  });

  it('fails with IMAGE_PULL_FAILED when the registry wants credentials', async () => {
    routes = [
      (_req, res) => {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="private"' }).end();
        return true;
      },
    ];
    expect((await codeOf(resolveImage(ref(), { arch: 'amd64' }))).code).toBe('IMAGE_PULL_FAILED');
  });

  /** An auth file in `dir` holding `user:password` for this file's registry. */
  async function authFile(userPassword: string): Promise<string> {
    const file = path.join(dir, 'registry-auth.json');
    await writeFile(
      file,
      JSON.stringify({
        auths: { [`127.0.0.1:${port}`]: { auth: Buffer.from(userPassword).toString('base64') } },
      }),
    );
    return file;
  }

  /** A registry that answers only requests with Basic `user:secret-pw`. */
  const basicOnly: Route = (req, res) => {
    if (req.headers.authorization === `Basic ${Buffer.from('robot:secret-pw').toString('base64')}`)
      return false;
    res.writeHead(401, { 'www-authenticate': 'Basic realm="private"' }).end();
    return true;
  };

  it('pulls from a registry with Basic auth with the credentials of the auth file', async () => {
    routes = [basicOnly, registry];
    const result = await pullImage(ref(), target, {
      arch: 'amd64',
      cacheDir,
      registryAuthFile: await authFile('robot:secret-pw'),
    });
    expect(result.layers).toBe(2);
    await expectSimTree('amd64');
  });

  it('says who the registry refused: anonymous and why, or the user and the file, never the password', async () => {
    routes = [basicOnly, registry];
    const failure = async (registryAuthFile?: string): Promise<string> => {
      const err = await resolveImage(ref(), { arch: 'amd64', registryAuthFile }).then(
        () => null,
        (e: unknown) => e as { code: string; message: string },
      );
      expect(err?.code).toBe('IMAGE_PULL_FAILED');
      expect(err?.message).not.toContain('pw');
      return err?.message ?? '';
    };
    expect(await failure()).toContain(
      'asks for a user and password (agentd pulled anonymously; give credentials with --registry-auth-file)',
    );
    const missing = path.join(dir, 'missing.json');
    expect(await failure(missing)).toContain(
      `agentd pulled anonymously: ${missing} has no credentials for 127.0.0.1:${port}`,
    );
    const wrong = await authFile('robot:wrong-pw');
    expect(await failure(wrong)).toContain(
      `HTTP 401 (as robot, the credentials for 127.0.0.1:${port} in ${wrong})`,
    );
  });

  it('sends the credentials to the token realm, and then only the token to the registry', async () => {
    const tokenRequests: { search: string; authorization?: string }[] = [];
    routes = [
      (req, res, url) => {
        if (url.pathname !== '/token') return false;
        tokenRequests.push({ search: url.search, authorization: req.headers.authorization });
        if (req.headers.authorization !== `Basic ${Buffer.from('robot:secret-pw').toString('base64')}`) {
          res.writeHead(401).end();
          return true;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: 'tok' }));
        return true;
      },
      (req, res) => {
        if (req.headers.authorization === 'Bearer tok') return false;
        res
          .writeHead(401, {
            'www-authenticate': `Bearer realm="http://127.0.0.1:${port}/token",service="private",scope="repository:sim/rootfs:pull"`,
          })
          .end();
        return true;
      },
      registry,
    ];
    const result = await pullImage(ref(), target, {
      arch: 'amd64',
      cacheDir,
      registryAuthFile: await authFile('robot:secret-pw'),
    });
    expect(result.layers).toBe(2);
    expect(tokenRequests).toEqual([
      {
        search: `?service=private&scope=${encodeURIComponent('repository:sim/rootfs:pull')}&account=robot`,
        authorization: `Basic ${Buffer.from('robot:secret-pw').toString('base64')}`,
      },
    ]);
    const registryAuth = new Set(
      requests.filter((r) => r.path.startsWith('/v2/')).map((r) => r.authorization),
    );
    expect(registryAuth).toEqual(new Set([undefined, 'Bearer tok']));
  });

  it('fails a pull with a broken auth file as INVALID_CONFIG before touching the target', async () => {
    await mkdir(target, { recursive: true });
    await writeFile(path.join(target, 'keep'), 'the previous rootfs');
    const file = path.join(dir, 'broken.json');
    await writeFile(file, '{"auths": ');
    const { code } = await codeOf(
      pullImage(ref(), target, { arch: 'amd64', cacheDir, registryAuthFile: file }),
    );
    expect(code).toBe('INVALID_CONFIG');
    expect(await readFile(path.join(target, 'keep'), 'utf8')).toBe('the previous rootfs');
    expect(requests).toEqual([]);
  });

  it('speaks HTTPS to a public registry host and refuses a plain-HTTP token realm on the way', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    const pool = agent.get('https://registry.example.com');
    pool.intercept({ path: '/v2/team/rootfs/manifests/v1', method: 'GET' }).reply(401, '', {
      headers: {
        'www-authenticate': 'Bearer realm="http://auth.example.com/token",service="registry.example.com"',
      },
    });
    try {
      const result = await codeOf(
        resolveImage('registry.example.com/team/rootfs:v1', { arch: 'amd64', dispatcher: agent, retries: 0 }),
      );
      expect(result.code).toBe('IMAGE_PULL_FAILED');
      expect(result.data?.url).toBe('http://auth.example.com/token');
      agent.assertNoPendingInterceptors();
    } finally {
      await agent.close();
    }
  });

  it('refuses a redirect of a public registry to plain HTTP', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agent
      .get('https://registry.example.com')
      .intercept({ path: '/v2/team/rootfs/manifests/v1', method: 'GET' })
      .reply(302, '', { headers: { location: 'http://cdn.example.com/m' } });
    try {
      const result = await codeOf(
        resolveImage('registry.example.com/team/rootfs:v1', { arch: 'amd64', dispatcher: agent, retries: 0 }),
      );
      expect(result).toMatchObject({ code: 'IMAGE_PULL_FAILED', data: { url: 'http://cdn.example.com/m' } });
    } finally {
      await agent.close();
    }
  });
});
