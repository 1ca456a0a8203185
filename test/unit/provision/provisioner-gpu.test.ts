/**
 * The provisioner on a GPU host and a plain one (a temp root with device nodes as files, a
 * recorded `ldconfig -p`, the sim mirror on 127.0.0.1): what the machine gets, what the
 * preflight says, the image order through the daemon's environment, and the registry
 * configuration carried from the serving machine.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_OCI_IMAGE, agentConfigSchema, type AgentConfig } from '../../../src/config/agent-config.js';
import { createHostPaths, type HostPaths } from '../../../src/host/paths.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { GPU_FILES } from '../../../src/provision/gpu/gpu-files.js';
import { createProvisioner, type ProvisionerOptions } from '../../../src/provision/provisioner.js';
import type { TaskContext } from '../../../src/tasks/tasks.js';
import { startMirror, type Mirror } from '../../../src/sim/mirror/index.js';
import { createOciImage } from '../../../src/sim/mirror/oci-image.js';
import { exists, mirrorAgentConfig, TEST_IMAGE_REPOSITORY } from '../../support/provision-fixtures.js';
import { createFakeClock } from '../host/fake-clock.js';
import { parseSections, values } from './files/ini.js';
import { ldconfigRunner, makeGpuHost } from './gpu/gpu-host.js';

const silent = pino({ level: 'silent' });
const ctx = (): TaskContext => ({
  signal: new AbortController().signal,
  logger: silent,
  progress: () => undefined,
});

describe('the provisioner on GPU and plain hosts', () => {
  let dir: string;
  let paths: HostPaths;
  let mirror: Mirror;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-provisioner-gpu-'));
    paths = createHostPaths(path.join(dir, 'root'));
    await mkdir(paths.resolve('/etc'), { recursive: true });
    await writeFile(paths.resolve('/etc/hostname'), 'gpu-7\n');
    await writeFile(paths.resolve('/etc/resolv.conf'), 'nameserver 10.0.0.2\n');
    mirror = await startMirror();
  });
  afterEach(async () => {
    await mirror.close();
    await rm(dir, { recursive: true, force: true });
  });

  function provisioner(options: Partial<ProvisionerOptions> = {}) {
    return createProvisioner({
      paths,
      stateDir: path.join(dir, 'state'),
      clock: createFakeClock(),
      logger: silent,
      metrics: createMetrics({ version: 'test', collectDefaults: false }),
      daemonReload: async () => undefined,
      arch: 'amd64',
      minFreeBytes: 1,
      ...options,
    });
  }

  function config(overrides: Parameters<typeof mirrorAgentConfig>[1] = {}): AgentConfig {
    return agentConfigSchema.parse(mirrorAgentConfig(mirror, overrides));
  }

  it('a GPU host: devices and library directories bound and allowed, the GPU files in the machine', async () => {
    await makeGpuHost(paths.root);
    const runner = ldconfigRunner();
    const p = provisioner({ runner });
    const c = config();
    const checks = await p.preflight(c, new AbortController().signal);
    expect(checks.find((x) => x.name === 'gpu')).toMatchObject({ ok: true });
    await p.provision('kube1', c, ctx());
    await p.stage('kube1', c, ctx());

    const settings = parseSections(await readFile(paths.nspawnFile('kube1'), 'utf8'));
    expect(values(settings, 'Files', 'Bind')).toContain('/dev/nvidia0');
    expect(values(settings, 'Files', 'Bind')).toContain('/dev/dri/renderD128');
    expect(values(settings, 'Files', 'BindReadOnly')).toEqual([
      '/lib/modules',
      '/usr/lib/x86_64-linux-gnu:/run/host-nvidia/0',
      '/opt/nvidia/lib64:/run/host-nvidia/1',
    ]);
    const dropIn = parseSections(await readFile(paths.nspawnDropIn('kube1'), 'utf8'));
    expect(values(dropIn, 'Service', 'DeviceAllow')).toContain('/dev/nvidia-caps/nvidia-cap1 rwm');

    const rootfs = paths.machineDir('kube1');
    for (const f of Object.values(GPU_FILES)) expect(await exists(path.join(rootfs, f)), f).toBe(true);
    const planned = p.plannedFiles('kube1', c);
    expect(planned).toContain(path.join(rootfs, GPU_FILES.runtimeDropIn));
    expect(planned).toContain(path.join(rootfs, GPU_FILES.setupUnit));
  });

  it("a plain host: no ldconfig, no gpu check, the image's GPU files removed, none planned", async () => {
    // A GPU image brings the drop-in and the setup unit; a host without a GPU must not keep them.
    await mirror.close();
    mirror = await startMirror({
      image: () =>
        createOciImage({
          extraFiles: [
            { path: GPU_FILES.runtimeDropIn, content: 'from the image' },
            { path: GPU_FILES.setupUnit, content: '[Unit]\n' },
          ],
        }),
    });
    const runner = ldconfigRunner();
    const p = provisioner({ runner });
    const c = config();
    const checks = await p.preflight(c, new AbortController().signal);
    expect(checks.map((x) => x.name)).not.toContain('gpu');
    const rootfs = paths.machineDir('kube1');
    await p.provision('kube1', c, ctx());
    await p.stage('kube1', c, ctx());
    expect(runner.calls).toEqual([]);
    for (const f of Object.values(GPU_FILES)) expect(await exists(path.join(rootfs, f)), f).toBe(false);
    const settings = await readFile(paths.nspawnFile('kube1'), 'utf8');
    expect(settings).not.toContain('host-nvidia');
    expect(p.plannedFiles('kube1', c).filter((f) => f.includes('nvidia'))).toEqual([]);
  });

  it('a GPU host without its driver libraries: preflight fails naming them, provision downloads nothing', async () => {
    await makeGpuHost(paths.root, { libraries: [] });
    const p = provisioner({ runner: ldconfigRunner("0 libs found in cache `/etc/ld.so.cache'\n") });
    const c = config();
    const gpu = (await p.preflight(c, new AbortController().signal)).find((x) => x.name === 'gpu');
    expect(gpu?.ok).toBe(false);
    expect(gpu?.message).toContain('libcuda.so.1, libnvidia-ml.so.1');
    await expect(p.provision('kube1', c, ctx())).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
    expect(await exists(paths.machineDir('kube1'))).toBe(false);
  });

  it("takes AGENT_OCI_IMAGE from the daemon's environment when the config names no image", async () => {
    const ref = `${mirror.hostPort}/${TEST_IMAGE_REPOSITORY}:from-env`;
    const p = provisioner({ env: { AGENT_OCI_IMAGE: ref } });
    const c = config({ OCIImage: DEFAULT_OCI_IMAGE });
    const image = (await p.preflight(c, new AbortController().signal)).find((x) => x.name === 'image');
    expect(image).toMatchObject({ ok: true, message: expect.stringContaining(`${ref} (AGENT_OCI_IMAGE)`) });
    await p.provision('kube1', c, ctx());
    expect(await exists(path.join(paths.machineDir('kube1'), 'etc/agentd-image-arch'))).toBe(true);
  });

  it('refuses AGENT_DISABLE_OCI_IMAGE at preflight, naming what to set instead', async () => {
    const p = provisioner({ env: { AGENT_DISABLE_OCI_IMAGE: 'true' } });
    const c = config({ OCIImage: DEFAULT_OCI_IMAGE });
    const image = (await p.preflight(c, new AbortController().signal)).find((x) => x.name === 'image');
    expect(image?.ok).toBe(false);
    expect(image?.message).toMatch(
      /AGENT_DISABLE_OCI_IMAGE is set.*AGENT_OCI_IMAGE or the config's OCIImage/,
    );
    await expect(p.provision('kube1', c, ctx())).rejects.toMatchObject({ code: 'UNSUPPORTED' });
  });

  it("carries the serving machine's certs.d to the new machine", async () => {
    const p = provisioner();
    const c = config();
    await p.provision('kube1', c, ctx());
    const hosts = 'etc/containerd/certs.d/docker.io/hosts.toml';
    await mkdir(path.dirname(path.join(paths.machineDir('kube1'), hosts)), { recursive: true });
    await writeFile(path.join(paths.machineDir('kube1'), hosts), 'server = "https://mirror.corp"\n');
    await p.provision('kube2', c, ctx());
    expect(await readFile(path.join(paths.machineDir('kube2'), hosts), 'utf8')).toBe(
      'server = "https://mirror.corp"\n',
    );
  });
});
