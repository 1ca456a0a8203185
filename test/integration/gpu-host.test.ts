/**
 * A GPU host through the real daemon (`--sim`): a root with NVIDIA device nodes made of files,
 * driver libraries and a recorded `ldconfig -p`. The join binds the devices and the library
 * directories, and the machine gets the GPU runtime drop-in and the setup unit; the dry run
 * announces them and shows the gpu check.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIM_LDCONFIG_OUTPUT } from '../../src/sim/host/host-commands.js';
import { makeTempDir, type TestDaemon } from '../support/daemon.js';
import { exists, rpcResult, startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';
import { LDCONFIG_OUTPUT, makeGpuHost } from '../unit/provision/gpu/gpu-host.js';

describe('a GPU host through the daemon', () => {
  let d: TestDaemon;
  let dir: string;
  let root: string;

  beforeAll(async () => {
    // In beforeAll: makeTempDir leaves the removal to the caller (afterAll).
    dir = await makeTempDir();
    root = path.join(dir, 'root');
    await makeGpuHost(root);
    await mkdir(path.dirname(path.join(root, SIM_LDCONFIG_OUTPUT)), { recursive: true });
    await writeFile(path.join(root, SIM_LDCONFIG_OUTPUT), LDCONFIG_OUTPUT);
    d = await startSimDaemon({ root });
  });
  afterAll(async () => {
    await d?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it('a dry run shows the gpu check and announces the GPU files', async () => {
    const op = await rpcResult<{
      result: { preflight: Array<{ name: string; ok: boolean }>; files?: string[] };
    }>(d, 'update', { dryRun: true });
    expect(op.result.preflight.find((c) => c.name === 'gpu')).toMatchObject({ ok: true });
    expect(JSON.stringify(op.result)).toContain('etc/containerd/conf.d/99-nvidia-runtime.toml');
  });

  it('the join binds the GPU and puts the runtime drop-in and the setup unit into the machine', async () => {
    const op = await updateAndWait(d);
    expect(op.state, JSON.stringify(op.error)).toBe('succeeded');
    const settings = await readFile(path.join(root, 'etc/systemd/nspawn/kube1.nspawn'), 'utf8');
    expect(settings).toContain('Bind=/dev/nvidia0\n');
    expect(settings).toContain('BindReadOnly=/opt/nvidia/lib64:/run/host-nvidia/1\n');
    const dropIn = await readFile(
      path.join(root, 'etc/systemd/system/systemd-nspawn@kube1.service.d/override.conf'),
      'utf8',
    );
    expect(dropIn).toContain('DeviceAllow=/dev/dri/renderD128 rwm\n');
    const rootfs = path.join(root, 'var/lib/machines/kube1');
    expect(await exists(path.join(rootfs, 'etc/containerd/conf.d/99-nvidia-runtime.toml'))).toBe(true);
    const unit = await readFile(path.join(rootfs, 'etc/systemd/system/agentd-nvidia-setup.service'), 'utf8');
    expect(unit).toContain(
      'ExecStart=ln -sfn /run/host-nvidia/1/libnvidia-ptxjitcompiler.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1\n',
    );
  });
});
