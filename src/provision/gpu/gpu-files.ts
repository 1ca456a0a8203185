/**
 * The files that make a machine use its host's GPUs, written at provision on a GPU host and
 * removed everywhere else (an image or a carried directory may hold them):
 *
 * - `/etc/containerd/conf.d/99-nvidia-runtime.toml`: the `nvidia` runtime, the default, with
 *   CDI enabled over `/etc/cdi` and `/var/run/cdi`;
 * - `agentd-nvidia-setup.service`, a oneshot containerd requires, so it runs after the machine
 *   boots (the `/run/host-nvidia/<i>` binds are mounted then) and before containerd: it
 *   replaces the links into `/run/host-nvidia/`, links each library into the multiarch
 *   directory, runs `ldconfig` and `nvidia-ctk cdi generate`. On every boot of the machine, so
 *   a machine started by repair or after a reboot is set up again for the driver it finds.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { toAgentError } from '../../errors.js';
import type { RootfsEntry } from '../files/rootfs-entry.js';
import { resolveParentInRootfs } from '../files/rootfs-path.js';
import { validateExpandedArg } from '../files/unit-syntax.js';
import { HOST_NVIDIA_DIR, type GpuHost } from './discover.js';

/** The rootfs paths of the GPU files (relative to the rootfs). */
export const GPU_FILES = Object.freeze({
  runtimeDropIn: 'etc/containerd/conf.d/99-nvidia-runtime.toml',
  setupUnit: 'etc/systemd/system/agentd-nvidia-setup.service',
  containerdDropIn: 'etc/systemd/system/containerd.service.d/50-nvidia.conf',
});

export const NVIDIA_RUNTIME = Object.freeze({
  name: 'nvidia',
  binary: '/usr/bin/nvidia-container-runtime',
  ctk: '/usr/bin/nvidia-ctk',
  cdiSpec: '/etc/cdi/nvidia.yaml',
  cdiDirs: ['/etc/cdi', '/var/run/cdi'],
});

const HEADER = '# Written by agentd on a GPU host; rewritten on every update.\n';

/** containerd's drop-in: the `nvidia` runtime (RuntimeClass `nvidia`) as the default, CDI on. */
export function renderNvidiaRuntimeDropIn(): string {
  const runtime = `plugins.'io.containerd.cri.v1.runtime'`;
  const table = `${runtime}.containerd.runtimes.${NVIDIA_RUNTIME.name}`;
  return `${HEADER}version = 3

[${runtime}]
  enable_cdi = true
  cdi_spec_dirs = [${NVIDIA_RUNTIME.cdiDirs.map((d) => `'${d}'`).join(', ')}]

  [${runtime}.containerd]
    default_runtime_name = '${NVIDIA_RUNTIME.name}'

    [${table}]
      runtime_type = 'io.containerd.runc.v2'

      [${table}.options]
        BinaryName = '${NVIDIA_RUNTIME.binary}'
        SystemdCgroup = true
`;
}

/** The in-machine setup, one command per `ExecStart=` (systemd runs them in order, stops at a failure). */
export function nvidiaSetupCommands(gpu: GpuHost): string[][] {
  const libDir = gpu.machineLibDir;
  const links = gpu.libraries.map((lib) => [
    'ln',
    '-sfn',
    `${HOST_NVIDIA_DIR}/${lib.dirIndex}/${lib.name}`,
    `${libDir}/${lib.name}`,
  ]);
  return [
    ['find', libDir, '-maxdepth', '1', '-lname', `${HOST_NVIDIA_DIR}/*`, '-delete'],
    ...links,
    ['ldconfig'],
    ['mkdir', '-p', path.posix.dirname(NVIDIA_RUNTIME.cdiSpec)],
    [
      NVIDIA_RUNTIME.ctk,
      'cdi',
      'generate',
      `--output=${NVIDIA_RUNTIME.cdiSpec}`,
      // Most hooks mount over /proc or need CUDA compat files, which a machine has not.
      '--disable-hook',
      'all',
      '--enable-hook',
      'create-symlinks',
      '--enable-hook',
      'update-ldcache',
    ],
  ];
}

/** `agentd-nvidia-setup.service` inside the machine. */
export function renderNvidiaSetupUnit(gpu: GpuHost): string {
  const lines = nvidiaSetupCommands(gpu).map(
    (argv) => `ExecStart=${argv.map((a) => validateExpandedArg(a, 'NVIDIA setup command')).join(' ')}\n`,
  );
  return (
    HEADER +
    '[Unit]\n' +
    "Description=agentd: the host's NVIDIA driver libraries and CDI spec for containerd\n" +
    'Before=containerd.service\n' +
    // The binds are the machine's: without them there is nothing to link.
    `ConditionPathIsDirectory=${HOST_NVIDIA_DIR}/0\n` +
    '\n' +
    '[Service]\n' +
    'Type=oneshot\n' +
    'RemainAfterExit=yes\n' +
    lines.join('')
  );
}

/** containerd's unit drop-in: containerd needs the setup (a failed setup fails containerd's start). */
export function renderContainerdNvidiaDropIn(): string {
  const unit = path.posix.basename(GPU_FILES.setupUnit);
  return `${HEADER}[Unit]\nRequires=${unit}\nAfter=${unit}\n`;
}

/** The GPU files for `gpu`, in writing order. */
export function renderGpuFiles(gpu: GpuHost): RootfsEntry[] {
  const file = (p: string, content: string): RootfsEntry => ({
    kind: 'file',
    path: p,
    mode: 0o644,
    content,
    secret: false,
  });
  return [
    file(GPU_FILES.runtimeDropIn, renderNvidiaRuntimeDropIn()),
    file(GPU_FILES.setupUnit, renderNvidiaSetupUnit(gpu)),
    file(GPU_FILES.containerdDropIn, renderContainerdNvidiaDropIn()),
  ];
}

/** Remove the GPU files from a rootfs (a host without a GPU); absent files are fine. */
export async function removeGpuFiles(rootfs: string): Promise<void> {
  for (const rel of Object.values(GPU_FILES)) {
    try {
      const dir = await resolveParentInRootfs(rootfs, rel);
      await rm(path.join(dir, path.posix.basename(rel)), { force: true });
    } catch (err) {
      throw toAgentError(err, `remove ${rel} from ${rootfs}`);
    }
  }
}
