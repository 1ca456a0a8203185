import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createHostPaths } from '../../../../src/host/paths.js';
import { readHostInfo } from '../../../../src/provision/files/host-info.js';
import { useTempDirs } from './tmp-dir.js';

const STUB =
  '# This is /run/systemd/resolve/stub-resolv.conf\nnameserver 127.0.0.53\noptions edns0 trust-ad\n';
const UPSTREAM = 'nameserver 10.1.0.2\nnameserver 10.1.0.3\nsearch example.internal\n';

describe('readHostInfo', () => {
  const tempDir = useTempDirs();

  async function put(root: string, hostPath: string, content: string): Promise<void> {
    const file = path.join(root, hostPath);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content);
  }

  async function hostRoot(): Promise<string> {
    const root = await tempDir();
    await put(root, '/etc/hostname', '# set by installer\n\nnode-a.example\n');
    await put(root, '/etc/resolv.conf', UPSTREAM);
    return root;
  }

  it('reads the hostname (skipping comments) and a plain resolv.conf as is', async () => {
    const info = await readHostInfo(createHostPaths(await hostRoot()));
    expect(info.hostname).toBe('node-a.example');
    expect(info.resolvConf).toBe(UPSTREAM);
    expect(info.devices).toEqual([]);
  });

  it('falls back to the running hostname only when /etc/hostname is missing', async () => {
    const root = await tempDir();
    await put(root, '/etc/resolv.conf', UPSTREAM);
    expect((await readHostInfo(createHostPaths(root))).hostname).toBe(os.hostname());
  });

  it("takes the running hostname (the Node's name) over /etc/hostname when they differ", async () => {
    const root = await hostRoot();
    await put(root, '/proc/sys/kernel/hostname', 'node-a-renamed\n');
    expect((await readHostInfo(createHostPaths(root))).hostname).toBe('node-a-renamed');
  });

  it('refuses a running hostname that is not one, naming the kernel file', async () => {
    const root = await hostRoot();
    await put(root, '/proc/sys/kernel/hostname', 'bad name\n');
    await expect(readHostInfo(createHostPaths(root))).rejects.toThrow(/proc\/sys\/kernel\/hostname/);
  });

  it('refuses a hostname that is not one', async () => {
    const root = await hostRoot();
    await put(root, '/etc/hostname', 'bad name\n');
    await expect(readHostInfo(createHostPaths(root))).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
  });

  it('replaces the systemd-resolved stub with the upstream servers when resolved publishes them', async () => {
    const root = await hostRoot();
    await put(root, '/etc/resolv.conf', STUB);
    await put(root, '/run/systemd/resolve/resolv.conf', UPSTREAM);
    expect((await readHostInfo(createHostPaths(root))).resolvConf).toBe(UPSTREAM);
  });

  it('keeps the stub when resolved publishes no upstream file', async () => {
    const root = await hostRoot();
    await put(root, '/etc/resolv.conf', STUB);
    expect((await readHostInfo(createHostPaths(root))).resolvConf).toBe(STUB);
  });

  it('follows an absolute /etc/resolv.conf symlink under the root, not on the real host', async () => {
    const root = await hostRoot();
    await put(root, '/run/systemd/resolve/stub-resolv.conf', STUB);
    await put(root, '/run/systemd/resolve/resolv.conf', UPSTREAM);
    const etcResolv = path.join(root, 'etc', 'resolv.conf');
    await rm(etcResolv);
    await symlink('/run/systemd/resolve/stub-resolv.conf', etcResolv);
    expect((await readHostInfo(createHostPaths(root))).resolvConf).toBe(UPSTREAM);
  });

  it('fails when the host has no resolv.conf', async () => {
    const root = await tempDir();
    await put(root, '/etc/hostname', 'h\n');
    await expect(readHostInfo(createHostPaths(root))).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
  });

  it('lists /dev/kvm and the NVIDIA device nodes (each node of nvidia-caps), sorted, and nothing else', async () => {
    const root = await hostRoot();
    for (const dev of ['kvm', 'nvidiactl', 'nvidia0', 'nvidia-uvm', 'null', 'sda', 'kvm2', 'nvidia bad']) {
      await put(root, `/dev/${dev}`, '');
    }
    await put(root, '/dev/nvidia-caps/nvidia-cap1', '');
    await put(root, '/usr/lib/x86_64-linux-gnu/libcuda.so.1', '');
    await put(root, '/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1', '');
    const cache =
      '\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n' +
      '\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n';
    const runner = {
      run: async () => ({ command: 'ldconfig -p', exitCode: 0, stdout: cache, stderr: '', durationMs: 0 }),
    };
    const info = await readHostInfo(createHostPaths(root), { runner });
    expect(info.devices).toEqual([
      '/dev/kvm',
      '/dev/nvidia-caps/nvidia-cap1',
      '/dev/nvidia-uvm',
      '/dev/nvidia0',
      '/dev/nvidiactl',
    ]);
  });
});
