import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { GpuHost } from '../../../../src/provision/gpu/discover.js';
import {
  GPU_FILES,
  nvidiaSetupCommands,
  removeGpuFiles,
  renderGpuFiles,
  renderNvidiaRuntimeDropIn,
  renderNvidiaSetupUnit,
} from '../../../../src/provision/gpu/gpu-files.js';
import { writeRootfsEntries } from '../../../../src/provision/files/rootfs-entry.js';
import { parseSections, values } from '../files/ini.js';
import { useTempDirs } from '../files/tmp-dir.js';

const GPU: GpuHost = {
  devices: ['/dev/nvidia0', '/dev/nvidiactl'],
  libraryDirs: ['/usr/lib/x86_64-linux-gnu', '/opt/nvidia/lib64'],
  libraries: [
    { name: 'libcuda.so.1', hostPath: '/usr/lib/x86_64-linux-gnu/libcuda.so.1', dirIndex: 0 },
    { name: 'libnvidia-ptx.so.1', hostPath: '/opt/nvidia/lib64/libnvidia-ptx.so.1', dirIndex: 1 },
  ],
  machineLibDir: '/usr/lib/x86_64-linux-gnu',
};

describe('99-nvidia-runtime.toml', () => {
  const s = parseSections(`[top]\n${renderNvidiaRuntimeDropIn()}`);
  const runtime = "plugins.'io.containerd.cri.v1.runtime'";

  it('enables CDI with the spec dirs /etc/cdi and /var/run/cdi', () => {
    expect(values(s, 'top', 'version')).toEqual(['3']);
    expect(values(s, runtime, 'enable_cdi')).toEqual(['true']);
    expect(values(s, runtime, 'cdi_spec_dirs')).toEqual(["['/etc/cdi', '/var/run/cdi']"]);
  });

  it('registers the nvidia runtime on nvidia-container-runtime as the default', () => {
    expect(values(s, `${runtime}.containerd`, 'default_runtime_name')).toEqual(["'nvidia'"]);
    expect(values(s, `${runtime}.containerd.runtimes.nvidia`, 'runtime_type')).toEqual([
      "'io.containerd.runc.v2'",
    ]);
    expect(values(s, `${runtime}.containerd.runtimes.nvidia.options`, 'BinaryName')).toEqual([
      "'/usr/bin/nvidia-container-runtime'",
    ]);
  });
});

describe('agentd-nvidia-setup.service', () => {
  it('replaces the old links, links each library, runs ldconfig and generates the CDI spec, in order', () => {
    expect(nvidiaSetupCommands(GPU).map((argv) => argv.join(' '))).toEqual([
      'find /usr/lib/x86_64-linux-gnu -maxdepth 1 -lname /run/host-nvidia/* -delete',
      'ln -sfn /run/host-nvidia/0/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1',
      'ln -sfn /run/host-nvidia/1/libnvidia-ptx.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ptx.so.1',
      'ldconfig',
      'mkdir -p /etc/cdi',
      '/usr/bin/nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml --disable-hook all --enable-hook create-symlinks --enable-hook update-ldcache',
    ]);
  });

  it('is a oneshot that runs before containerd, once the binds are there', () => {
    const s = parseSections(renderNvidiaSetupUnit(GPU));
    expect(values(s, 'Unit', 'Before')).toEqual(['containerd.service']);
    expect(values(s, 'Unit', 'ConditionPathIsDirectory')).toEqual(['/run/host-nvidia/0']);
    expect(values(s, 'Service', 'Type')).toEqual(['oneshot']);
    expect(values(s, 'Service', 'ExecStart')).toHaveLength(6);
  });

  it("makes containerd require it, so a failed setup fails containerd's start", () => {
    const entry = renderGpuFiles(GPU).find((e) => e.path === GPU_FILES.containerdDropIn);
    const s = parseSections(entry?.kind === 'file' ? entry.content : '');
    expect(values(s, 'Unit', 'Requires')).toEqual(['agentd-nvidia-setup.service']);
    expect(values(s, 'Unit', 'After')).toEqual(['agentd-nvidia-setup.service']);
  });
});

describe('removeGpuFiles', () => {
  const tempDir = useTempDirs();

  it('removes the three GPU files and nothing else', async () => {
    const rootfs = await tempDir();
    await writeRootfsEntries(rootfs, renderGpuFiles(GPU));
    await writeFile(path.join(rootfs, 'etc/containerd/conf.d/50-operator.toml'), '');
    await removeGpuFiles(rootfs);
    expect(await readdir(path.join(rootfs, 'etc/containerd/conf.d'))).toEqual(['50-operator.toml']);
    expect(await readdir(path.join(rootfs, 'etc/systemd/system'))).toEqual(['containerd.service.d']);
    expect(await readdir(path.join(rootfs, 'etc/systemd/system/containerd.service.d'))).toEqual([]);
  });

  it('is fine with a rootfs that has none of them', async () => {
    const rootfs = await tempDir();
    await mkdir(path.join(rootfs, 'etc'), { recursive: true });
    await removeGpuFiles(rootfs);
    expect(await readFile(path.join(rootfs, 'etc'), 'utf8').catch((e: NodeJS.ErrnoException) => e.code)).toBe(
      'EISDIR',
    );
  });
});
