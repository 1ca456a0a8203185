import { lstat, mkdir, readFile, readlink, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { carryRegistryConfig } from '../../../../src/provision/files/carry-registry-config.js';
import { useTempDirs } from './tmp-dir.js';

async function put(root: string, rel: string, content: string, mode = 0o644): Promise<void> {
  await mkdir(path.dirname(path.join(root, rel)), { recursive: true });
  await writeFile(path.join(root, rel), content, { mode });
}

describe('carrying registry configuration to the new machine', () => {
  const tempDir = useTempDirs();

  it('copies certs.d mirrors and credentials and conf.d drop-ins, with their modes', async () => {
    const source = await tempDir();
    const target = await tempDir();
    await put(source, 'etc/containerd/certs.d/docker.io/hosts.toml', 'server = "https://mirror.corp"\n');
    await put(source, 'etc/containerd/certs.d/registry.corp/client.key', 'KEY', 0o600);
    await symlink('/etc/ssl/corp-ca.pem', path.join(source, 'etc/containerd/certs.d/registry.corp/ca.crt'));
    await put(source, 'etc/containerd/conf.d/50-operator.toml', '[plugins]\n');
    // agentd's own GPU drop-in is never carried: it follows the new host's devices.
    await put(source, 'etc/containerd/conf.d/99-nvidia-runtime.toml', 'stale');
    // The image's own file of the same name loses to the operator's.
    await put(target, 'etc/containerd/certs.d/docker.io/hosts.toml', 'from the image');

    const result = await carryRegistryConfig(source, target);

    expect(result.copied).toEqual([
      'etc/containerd/certs.d/docker.io/hosts.toml',
      'etc/containerd/certs.d/registry.corp/ca.crt',
      'etc/containerd/certs.d/registry.corp/client.key',
      'etc/containerd/conf.d/50-operator.toml',
    ]);
    expect(await readFile(path.join(target, 'etc/containerd/certs.d/docker.io/hosts.toml'), 'utf8')).toBe(
      'server = "https://mirror.corp"\n',
    );
    expect(
      (await lstat(path.join(target, 'etc/containerd/certs.d/registry.corp/client.key'))).mode & 0o777,
    ).toBe(0o600);
    expect(await readlink(path.join(target, 'etc/containerd/certs.d/registry.corp/ca.crt'))).toBe(
      '/etc/ssl/corp-ca.pem',
    );
    await expect(lstat(path.join(target, 'etc/containerd/conf.d/99-nvidia-runtime.toml'))).rejects.toThrow(
      /ENOENT/,
    );
  });

  it('carries nothing from a machine that does not exist (first join, after reset)', async () => {
    const target = await tempDir();
    const result = await carryRegistryConfig(path.join(target, 'no-such-machine'), target);
    expect(result.copied).toEqual([]);
  });

  it('never writes through a symlink of the image out of the new rootfs', async () => {
    const source = await tempDir();
    const target = await tempDir();
    const outside = await tempDir();
    await put(source, 'etc/containerd/certs.d/docker.io/hosts.toml', 'mirror');
    // The image made certs.d an absolute link: it must resolve inside the target rootfs.
    await mkdir(path.join(target, 'etc/containerd'), { recursive: true });
    await symlink(outside, path.join(target, 'etc/containerd/certs.d'));
    await carryRegistryConfig(source, target);
    await expect(lstat(path.join(outside, 'docker.io/hosts.toml'))).rejects.toThrow(/ENOENT/);
    expect(await readFile(path.join(target, outside, 'docker.io/hosts.toml'), 'utf8')).toBe('mirror');
  });
});
