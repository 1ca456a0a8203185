import { lstat, mkdir, readFile, readlink, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { HostInfo } from '../../../../src/provision/files/host-info.js';
import { writeOsFiles } from '../../../../src/provision/files/os-files.js';
import { useTempDirs } from './tmp-dir.js';

const HOST: HostInfo = { hostname: 'node-a', resolvConf: 'nameserver 10.1.0.2', devices: ['/dev/kvm'] };

describe('writeOsFiles', () => {
  const tempDir = useTempDirs();

  it('writes hostname, resolv.conf, modules and kmsg, and masks systemd-resolved', async () => {
    const rootfs = await tempDir();
    await writeOsFiles(rootfs, HOST);
    const read = (rel: string) => readFile(path.join(rootfs, rel), 'utf8');
    expect(await read('etc/hostname')).toBe('node-a\n');
    expect(await read('etc/resolv.conf')).toBe('nameserver 10.1.0.2\n');
    const modules = (await read('etc/modules-load.d/kubernetes.conf'))
      .split('\n')
      .filter((l) => l && !l.startsWith('#'));
    expect(modules).toEqual(['overlay', 'br_netfilter']);
    expect(await read('etc/tmpfiles.d/kmsg.conf')).toContain('\nL /dev/kmsg - - - - /dev/console\n');
    const mask = path.join(rootfs, 'etc/systemd/system/systemd-resolved.service');
    expect((await lstat(mask)).isSymbolicLink()).toBe(true);
    expect(await readlink(mask)).toBe('/dev/null');
    for (const rel of [
      'etc/hostname',
      'etc/resolv.conf',
      'etc/modules-load.d/kubernetes.conf',
      'etc/tmpfiles.d/kmsg.conf',
    ]) {
      expect((await lstat(path.join(rootfs, rel))).mode & 0o777, rel).toBe(0o644);
    }
  });

  it("replaces the image's resolv.conf symlink with a regular file and leaves its target alone", async () => {
    const base = await tempDir();
    const rootfs = path.join(base, 'rootfs');
    const hostFile = path.join(base, 'host-resolv.conf');
    await writeFile(hostFile, 'host\n');
    await mkdir(path.join(rootfs, 'etc'), { recursive: true });
    await symlink(hostFile, path.join(rootfs, 'etc', 'resolv.conf'));
    await writeOsFiles(rootfs, HOST);
    expect((await lstat(path.join(rootfs, 'etc', 'resolv.conf'))).isFile()).toBe(true);
    expect(await readFile(hostFile, 'utf8')).toBe('host\n');
  });

  it('is idempotent', async () => {
    const rootfs = await tempDir();
    await writeOsFiles(rootfs, HOST);
    await writeOsFiles(rootfs, { ...HOST, hostname: 'node-b' });
    expect(await readFile(path.join(rootfs, 'etc/hostname'), 'utf8')).toBe('node-b\n');
    expect(await readlink(path.join(rootfs, 'etc/systemd/system/systemd-resolved.service'))).toBe(
      '/dev/null',
    );
  });
});
