/**
 * Push the sim OCI image to a real registry (Debian's docker-registry, distribution 2.x) with
 * skopeo, then pull it with `pullImage`: proves the puller against a registry it did not write.
 * Skipped when docker-registry or skopeo is missing, unless AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { mkdir, mkdtemp, readFile, readdir, readlink, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pullImage, resolveImage } from '../../src/provision/oci/index.js';
import { createOciImage, writeOciLayout } from '../../src/sim/mirror/oci-image.js';
import {
  REGISTRY_BIN,
  hasTool,
  skopeoPush,
  startDockerRegistry,
  type RealRegistry,
} from '../support/provision-fixtures.js';

const available = hasTool(REGISTRY_BIN) && hasTool('skopeo');
const required = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';

describe.skipIf(!available && !required)('pull from a real registry (docker-registry + skopeo)', () => {
  let dir: string;
  let registry: RealRegistry | undefined;
  let host: string;
  const image = createOciImage({
    extraFiles: [
      { path: 'usr/local/bin/tool', content: '#!/bin/sh\necho tool\n', mode: 0o755 },
      { path: 'usr/local/bin/tool-alias', type: 'symlink', linkTarget: 'tool' },
      { path: 'usr/local/bin/tool-hardlink', type: 'hardlink', linkTarget: 'usr/local/bin/tool' },
    ],
  });

  beforeAll(async () => {
    if (!available)
      throw new Error('AGENTD_REQUIRE_SYSTEM_TESTS=1 but docker-registry or skopeo is not installed');
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-registry-'));
    registry = await startDockerRegistry(dir);
    host = registry.host;
    const layout = path.join(dir, 'layout');
    await writeOciLayout(layout, image, { tag: 'v1' });
    await skopeoPush(dir, layout, 'v1', `${host}/agentd/rootfs:v1`);
  });

  afterAll(async () => {
    await registry?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it.each(['amd64', 'arm64'] as const)('pulls linux/%s into a rootfs', async (arch) => {
    const target = path.join(dir, 'machines', arch);
    const cacheDir = path.join(dir, 'cache');
    await mkdir(target, { recursive: true });
    await writeFile(path.join(target, 'stale'), 'from an earlier machine');
    const result = await pullImage(`${host}/agentd/rootfs:v1`, target, { arch, cacheDir });
    expect(result).toMatchObject({
      digest: image.index.digest,
      manifestDigest: image.manifests[arch].digest,
      layers: 2,
    });

    expect(await readFile(path.join(target, 'etc/os-release'), 'utf8')).toContain('ID=agentd-sim');
    expect(await readFile(path.join(target, 'etc/agentd-image-arch'), 'utf8')).toBe(`${arch}\n`);
    expect((await readdir(target)).sort()).toEqual(['bin', 'etc', 'opt', 'usr', 'var']);
    expect((await readdir(path.join(target, 'etc'))).sort()).toEqual([
      'agentd-image-arch',
      'hostname',
      'os-release',
      'systemd',
    ]);
    expect(await readdir(path.join(target, 'opt/legacy'))).toEqual(['new.conf']);
    for (const d of ['usr/local/bin', 'opt/cni/bin', 'var/lib/kubelet', 'etc/systemd/system', 'bin']) {
      expect((await stat(path.join(target, d))).isDirectory()).toBe(true);
    }
    const tool = await stat(path.join(target, 'usr/local/bin/tool'));
    expect(tool.mode & 0o777).toBe(0o755);
    expect((await stat(path.join(target, 'usr/local/bin/tool-hardlink'))).ino).toBe(tool.ino);
    expect(await readlink(path.join(target, 'usr/local/bin/tool-alias'))).toBe('tool');
  });

  it('resolves by digest and reports an unknown tag', async () => {
    const resolved = await resolveImage(`${host}/agentd/rootfs@${image.index.digest}`, { arch: 'arm64' });
    expect(resolved).toMatchObject({
      digest: image.index.digest,
      manifestDigest: image.manifests.arm64.digest,
      layers: 2,
    });
    await expect(
      resolveImage(`${host}/agentd/rootfs:nope`, { arch: 'amd64', retries: 0 }),
    ).rejects.toMatchObject({
      code: 'IMAGE_PULL_FAILED',
    });
  });
});
