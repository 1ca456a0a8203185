import { mkdir, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createHostPaths } from '../../../../src/host/paths.js';
import {
  nspawnFileList,
  removeNspawnFiles,
  renderNspawnDropIn,
  renderNspawnSettings,
  writeNspawnFiles,
} from '../../../../src/provision/files/nspawn-files.js';
import { parseSections, values } from './ini.js';
import { useTempDirs } from './tmp-dir.js';

const HOST = {
  hostname: 'node-a',
  resolvConf: 'nameserver 10.1.0.2\n',
  devices: ['/dev/kvm', '/dev/nvidia0', '/dev/nvidia-caps/nvidia-cap1', '/dev/dri/card0'],
};

const GPU = {
  devices: ['/dev/nvidia0', '/dev/nvidia-caps/nvidia-cap1', '/dev/dri/card0'],
  libraryDirs: ['/usr/lib/x86_64-linux-gnu', '/opt/nvidia/lib64'],
  libraries: [
    { name: 'libcuda.so.1', hostPath: '/usr/lib/x86_64-linux-gnu/libcuda.so.1', dirIndex: 0 },
    { name: 'libnvidia-ptx.so.1', hostPath: '/opt/nvidia/lib64/libnvidia-ptx.so.1', dirIndex: 1 },
  ],
  machineLibDir: '/usr/lib/x86_64-linux-gnu',
};

describe('nspawn settings', () => {
  it('has the upstream [Exec], [Network] and [Files] settings and binds each device', () => {
    const s = parseSections(renderNspawnSettings('kube2', HOST.devices));
    expect([...s.keys()]).toEqual(['Exec', 'Network', 'Files']);
    expect(s.get('Exec')).toEqual([
      ['Capability', 'all'],
      ['PrivateUsers', 'no'],
      ['SystemCallFilter', '@keyring bpf'],
    ]);
    expect(s.get('Network')).toEqual([['VirtualEthernet', 'no']]);
    expect(values(s, 'Files', 'BindReadOnly')).toEqual(['/lib/modules']);
    expect(values(s, 'Files', 'Bind')).toEqual([
      '/dev/kvm',
      '/dev/nvidia0',
      '/dev/nvidia-caps/nvidia-cap1',
      '/dev/dri/card0',
    ]);
  });

  it('binds each GPU driver library directory read-only at /run/host-nvidia/<i>', () => {
    const s = parseSections(renderNspawnSettings('kube1', HOST.devices, GPU));
    expect(values(s, 'Files', 'BindReadOnly')).toEqual([
      '/lib/modules',
      '/usr/lib/x86_64-linux-gnu:/run/host-nvidia/0',
      '/opt/nvidia/lib64:/run/host-nvidia/1',
    ]);
  });

  it('refuses a library directory nspawn would misread', () => {
    for (const bad of ['/a:b', 'relative/lib', '/usr/../etc', '/a b']) {
      expect(() => renderNspawnSettings('kube1', [], { ...GPU, libraryDirs: [bad] }), bad).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG' }),
      );
    }
  });

  it('binds nothing extra on a host without devices', () => {
    expect(values(parseSections(renderNspawnSettings('kube1', [])), 'Files', 'Bind')).toEqual([]);
  });

  it('refuses device paths outside /dev or that nspawn would misread', () => {
    for (const bad of ['/etc/shadow', '/dev/../etc/shadow', '/dev/a:b', '/dev/a b', 'dev/kvm']) {
      expect(() => renderNspawnSettings('kube1', [bad]), bad).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG' }),
      );
    }
  });
});

describe('nspawn service drop-in', () => {
  it('puts StartLimitIntervalSec in [Unit] and the restart policy and environment in [Service]', () => {
    const s = parseSections(renderNspawnDropIn('kube1', []));
    expect(s.get('Unit')).toEqual([['StartLimitIntervalSec', '0']]);
    expect(values(s, 'Service', 'StartLimitIntervalSec')).toEqual([]);
    expect(values(s, 'Service', 'Restart')).toEqual(['on-failure']);
    expect(values(s, 'Service', 'RestartSec')).toEqual(['10s']);
    expect(values(s, 'Service', 'ExecStartPre')).toEqual(['-/usr/bin/machinectl terminate kube1']);
    expect(values(s, 'Service', 'Environment')).toEqual([
      'SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1',
      'SYSTEMD_NSPAWN_API_VFS_WRITABLE=network',
    ]);
  });

  it('allows each bound device through the closed device policy', () => {
    const s = parseSections(renderNspawnDropIn('kube2', HOST.devices));
    expect(values(s, 'Service', 'ExecStartPre')).toEqual(['-/usr/bin/machinectl terminate kube2']);
    expect(values(s, 'Service', 'DeviceAllow')).toEqual([
      '/dev/kvm rwm',
      '/dev/nvidia0 rwm',
      '/dev/nvidia-caps/nvidia-cap1 rwm',
      '/dev/dri/card0 rwm',
    ]);
  });
});

describe('writeNspawnFiles / removeNspawnFiles', () => {
  const tempDir = useTempDirs();

  it('writes both files with mode 0644 where the host layout puts them', async () => {
    const root = await tempDir();
    const paths = createHostPaths(root);
    await writeNspawnFiles(paths, 'kube1', HOST);
    const settings = path.join(root, 'etc/systemd/nspawn/kube1.nspawn');
    const dropIn = path.join(root, 'etc/systemd/system/systemd-nspawn@kube1.service.d/override.conf');
    expect(nspawnFileList(paths, 'kube1')).toEqual([
      { path: settings, mode: 0o644 },
      { path: dropIn, mode: 0o644 },
    ]);
    expect(await readFile(settings, 'utf8')).toBe(renderNspawnSettings('kube1', HOST.devices));
    expect(await readFile(dropIn, 'utf8')).toBe(renderNspawnDropIn('kube1', HOST.devices));
    expect((await stat(settings)).mode & 0o777).toBe(0o644);
    expect((await stat(dropIn)).mode & 0o777).toBe(0o644);
  });

  it("removes one machine's files and leaves the other machine's alone", async () => {
    const root = await tempDir();
    const paths = createHostPaths(root);
    await writeNspawnFiles(paths, 'kube1', HOST);
    await writeNspawnFiles(paths, 'kube2', HOST);
    await removeNspawnFiles(paths, 'kube1');
    expect(await readdir(path.join(root, 'etc/systemd/nspawn'))).toEqual(['kube2.nspawn']);
    expect(await readdir(path.join(root, 'etc/systemd/system'))).toEqual(['systemd-nspawn@kube2.service.d']);
  });

  it('treats absent files as removed, and keeps a drop-in directory that holds other files', async () => {
    const root = await tempDir();
    const paths = createHostPaths(root);
    await removeNspawnFiles(paths, 'kube2');
    await writeNspawnFiles(paths, 'kube2', HOST);
    await mkdir(paths.nspawnDropInDir('kube2'), { recursive: true });
    await writeFile(path.join(paths.nspawnDropInDir('kube2'), 'local.conf'), '[Service]\n');
    await removeNspawnFiles(paths, 'kube2');
    expect(await readdir(paths.nspawnDropInDir('kube2'))).toEqual(['local.conf']);
    await expect(stat(paths.nspawnFile('kube2'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
