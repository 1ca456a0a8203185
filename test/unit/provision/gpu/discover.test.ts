import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createHostPaths } from '../../../../src/host/paths.js';
import { readHostInfo } from '../../../../src/provision/files/host-info.js';
import { parseLdconfigCache } from '../../../../src/provision/gpu/ldconfig-cache.js';
import { useTempDirs } from '../files/tmp-dir.js';
import { GPU_DEVICES, HOST_LIBRARIES, LDCONFIG_OUTPUT, ldconfigRunner, makeGpuHost } from './gpu-host.js';

async function plainHost(root: string): Promise<void> {
  await mkdir(path.join(root, 'etc'), { recursive: true });
  await writeFile(path.join(root, 'etc/hostname'), 'gpu-node\n');
  await writeFile(path.join(root, 'etc/resolv.conf'), 'nameserver 10.0.0.2\n');
}

describe('ldconfig -p', () => {
  it('keeps the driver libraries of the host architecture, the first entry of each name', () => {
    expect(parseLdconfigCache(LDCONFIG_OUTPUT, 'amd64')).toEqual([
      { name: 'libnvidia-ml.so.1', path: '/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1' },
      { name: 'libnvidia-ptxjitcompiler.so.1', path: '/opt/nvidia/lib64/libnvidia-ptxjitcompiler.so.1' },
      { name: 'libcuda.so.1', path: '/usr/lib/x86_64-linux-gnu/libcuda.so.1' },
      { name: 'libcuda.so', path: '/usr/lib/x86_64-linux-gnu/libcuda.so' },
      { name: 'libGLX_nvidia.so.0', path: '/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0' },
    ]);
  });

  it('finds no x86-64 library on an arm64 host', () => {
    expect(parseLdconfigCache(LDCONFIG_OUTPUT, 'arm64')).toEqual([]);
    const arm = '\tlibcuda.so.1 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libcuda.so.1\n';
    expect(parseLdconfigCache(arm, 'arm64')).toEqual([
      { name: 'libcuda.so.1', path: '/usr/lib/aarch64-linux-gnu/libcuda.so.1' },
    ]);
  });
});

describe('GPU discovery', () => {
  const tempDir = useTempDirs();

  it('finds no GPU, and runs no command, on a host without /dev/nvidia*', async () => {
    const root = await tempDir();
    await plainHost(root);
    // An integrated GPU alone is no NVIDIA host.
    await mkdir(path.join(root, 'dev/dri'), { recursive: true });
    await writeFile(path.join(root, 'dev/dri/card0'), '');
    const runner = ldconfigRunner();
    const info = await readHostInfo(createHostPaths(root), { runner });
    expect(info.gpu).toBeNull();
    expect(info.devices).toEqual([]);
    expect(runner.calls).toEqual([]);
  });

  it('lists the device nodes and the libraries, one bind per library directory', async () => {
    const root = await tempDir();
    await plainHost(root);
    await makeGpuHost(root);
    const runner = ldconfigRunner();
    const info = await readHostInfo(createHostPaths(root), { runner, arch: 'amd64' });
    expect(runner.calls).toEqual(['ldconfig -p']);
    expect(info.devices).toEqual(GPU_DEVICES);
    expect(info.gpu).toEqual({
      devices: GPU_DEVICES,
      libraryDirs: ['/usr/lib/x86_64-linux-gnu', '/opt/nvidia/lib64'],
      libraries: [
        { name: 'libnvidia-ml.so.1', hostPath: HOST_LIBRARIES[0], dirIndex: 0 },
        { name: 'libnvidia-ptxjitcompiler.so.1', hostPath: HOST_LIBRARIES[1], dirIndex: 1 },
        { name: 'libcuda.so.1', hostPath: HOST_LIBRARIES[2], dirIndex: 0 },
        { name: 'libcuda.so', hostPath: HOST_LIBRARIES[3], dirIndex: 0 },
        { name: 'libGLX_nvidia.so.0', hostPath: HOST_LIBRARIES[4], dirIndex: 0 },
      ],
      machineLibDir: '/usr/lib/x86_64-linux-gnu',
    });
  });

  it('fails naming the required libraries the cache lacks', async () => {
    const root = await tempDir();
    await plainHost(root);
    await makeGpuHost(root);
    const err = await readHostInfo(createHostPaths(root), {
      runner: ldconfigRunner("0 libs found in cache `/etc/ld.so.cache'\n"),
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'PRECONDITION_FAILED' });
    expect((err as Error).message).toMatch(
      /ldconfig -p lists no libcuda\.so\.1, libnvidia-ml\.so\.1 for amd64/,
    );
    expect((err as Error).message).toContain('/dev/nvidia0');
  });

  it('fails naming the library files the cache names but the host lacks', async () => {
    const root = await tempDir();
    await plainHost(root);
    await makeGpuHost(root, { libraries: HOST_LIBRARIES.slice(0, 3) });
    await expect(readHostInfo(createHostPaths(root), { runner: ldconfigRunner() })).rejects.toThrow(
      /do not exist: \/usr\/lib\/x86_64-linux-gnu\/libcuda\.so, \/usr\/lib\/x86_64-linux-gnu\/libGLX_nvidia\.so\.0/,
    );
  });

  it('fails with what ldconfig said when it cannot run', async () => {
    const root = await tempDir();
    await plainHost(root);
    await makeGpuHost(root);
    const runner = {
      run: () => Promise.reject(new Error('spawn ldconfig ENOENT')),
    };
    await expect(readHostInfo(createHostPaths(root), { runner })).rejects.toThrow(
      /cannot list the driver's libraries with ldconfig -p: spawn ldconfig ENOENT/,
    );
  });
});
