import { lstat, mkdir, readFile, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  resolveParentInRootfs,
  resolvePathInRootfs,
  writeRootfsFile,
  writeRootfsSymlink,
} from '../../../../src/provision/files/rootfs-path.js';
import { useTempDirs } from './tmp-dir.js';

describe('rootfs paths', () => {
  const tempDir = useTempDirs();

  /** A rootfs and, beside it, a directory standing for the host's own files. */
  async function setup(): Promise<{ rootfs: string; outside: string }> {
    const base = await tempDir();
    const rootfs = path.join(base, 'rootfs');
    const outside = path.join(base, 'outside');
    await mkdir(rootfs);
    await mkdir(outside);
    return { rootfs, outside };
  }

  it('re-roots absolute directory symlinks at the rootfs', async () => {
    const { rootfs, outside } = await setup();
    await mkdir(path.join(rootfs, 'run'));
    // Like `var/run -> /run` in a real image, but pointing at a path that also exists outside.
    await mkdir(path.join(rootfs, 'var'));
    await symlink(outside, path.join(rootfs, 'var', 'run'));
    const dir = await resolveParentInRootfs(rootfs, 'var/run/x.conf');
    expect(dir).toBe(path.join(rootfs, outside));
    await writeRootfsFile(rootfs, 'var/run/x.conf', 'inside\n', 0o644);
    expect(await readFile(path.join(rootfs, outside, 'x.conf'), 'utf8')).toBe('inside\n');
    await expect(stat(path.join(outside, 'x.conf'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('clamps relative symlinks that climb above the rootfs', async () => {
    const { rootfs } = await setup();
    await mkdir(path.join(rootfs, 'etc'));
    await symlink('../../../../../../etc', path.join(rootfs, 'etc', 'up'));
    expect(await resolveParentInRootfs(rootfs, 'etc/up/file')).toBe(path.join(rootfs, 'etc'));
  });

  it('replaces a symlink in place of the file instead of writing through it', async () => {
    const { rootfs, outside } = await setup();
    const hostFile = path.join(outside, 'resolv.conf');
    await writeFile(hostFile, 'host content\n');
    await mkdir(path.join(rootfs, 'etc'));
    // Pointing at the host file from outside the rootfs: a naive writer would overwrite it.
    await symlink(path.join('..', '..', 'outside', 'resolv.conf'), path.join(rootfs, 'etc', 'resolv.conf'));
    await writeRootfsFile(rootfs, 'etc/resolv.conf', 'machine content\n', 0o644);
    expect(await readFile(hostFile, 'utf8')).toBe('host content\n');
    const st = await lstat(path.join(rootfs, 'etc', 'resolv.conf'));
    expect(st.isFile()).toBe(true);
    expect(await readFile(path.join(rootfs, 'etc', 'resolv.conf'), 'utf8')).toBe('machine content\n');
  });

  it('writes with the requested mode, also over an existing file', async () => {
    const { rootfs } = await setup();
    await mkdir(path.join(rootfs, 'secret'));
    await writeFile(path.join(rootfs, 'secret', 'f'), 'old', { mode: 0o644 });
    await writeRootfsFile(rootfs, 'secret/f', 'new', 0o600);
    expect((await stat(path.join(rootfs, 'secret', 'f'))).mode & 0o777).toBe(0o600);
  });

  it('refuses a directory where the file goes, and a file where a directory goes', async () => {
    const { rootfs } = await setup();
    await mkdir(path.join(rootfs, 'etc', 'hostname'), { recursive: true });
    await expect(writeRootfsFile(rootfs, 'etc/hostname', 'h\n', 0o644)).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
    });
    await writeFile(path.join(rootfs, 'var'), 'not a dir');
    await expect(writeRootfsFile(rootfs, 'var/lib/kubelet/config.yaml', 'x', 0o644)).rejects.toMatchObject({
      code: 'PRECONDITION_FAILED',
    });
  });

  it('refuses paths that are absolute or climb with ..', async () => {
    const { rootfs } = await setup();
    await expect(writeRootfsFile(rootfs, '/etc/hostname', 'h', 0o644)).rejects.toMatchObject({
      code: 'INTERNAL',
    });
    await expect(writeRootfsFile(rootfs, 'etc/../../x', 'h', 0o644)).rejects.toMatchObject({
      code: 'INTERNAL',
    });
  });

  it('stops following symlink loops', async () => {
    const { rootfs } = await setup();
    await symlink('b', path.join(rootfs, 'a'));
    await symlink('a', path.join(rootfs, 'b'));
    await expect(resolvePathInRootfs(rootfs, 'a/x')).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
  });

  it('creates a symlink, replacing a file or another link', async () => {
    const { rootfs } = await setup();
    const rel = 'etc/systemd/system/systemd-resolved.service';
    await writeRootfsSymlink(rootfs, rel, '/dev/null');
    expect(await readlink(path.join(rootfs, rel))).toBe('/dev/null');
    await writeRootfsFile(rootfs, rel, 'a unit\n', 0o644);
    await writeRootfsSymlink(rootfs, rel, '/dev/null');
    expect(await readlink(path.join(rootfs, rel))).toBe('/dev/null');
    await writeRootfsSymlink(rootfs, rel, '/dev/null');
    expect(await readlink(path.join(rootfs, rel))).toBe('/dev/null');
  });
});
