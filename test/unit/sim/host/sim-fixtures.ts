/** Temp roots and machine rootfs fixtures for tests of the simulated host. */
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHostPaths } from '../../../../src/host/paths.js';
import type { MachineName } from '../../../../src/host/types.js';
import { KUBELET_DROP_IN } from '../../../../src/sim/host/index.js';

export interface TempRoot {
  root: string;
  cleanup(): Promise<void>;
}

export async function makeTempRoot(prefix = 'agentd-sim-'): Promise<TempRoot> {
  const root = await mkdtemp(path.join(os.tmpdir(), prefix));
  return { root, cleanup: () => rm(root, { recursive: true, force: true }) };
}

export interface MachineFixture {
  /** Version `usr/local/bin/kubelet --version` reports; null: no kubelet binary. Default 1.34.0. */
  kubeletVersion?: string | null;
  /** Version the drop-in declares; null: no drop-in. Default: kubeletVersion or 1.34.0. */
  declaredVersion?: string | null;
  /** Install `usr/local/bin/containerd` (default true). */
  containerd?: boolean;
  /** Write `/etc/systemd/nspawn/<m>.nspawn` (default true). */
  nspawn?: boolean;
}

async function writeExecutable(file: string, script: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, script);
  await chmod(file, 0o755);
}

/** Lay out a provisioned and staged machine under `root` the way provisioning would. */
export async function prepareMachine(
  root: string,
  m: MachineName,
  fixture: MachineFixture = {},
): Promise<string> {
  const paths = createHostPaths(root);
  const rootfs = paths.machineDir(m);
  await mkdir(path.join(rootfs, 'etc'), { recursive: true });
  const kubeletVersion = fixture.kubeletVersion === undefined ? '1.34.0' : fixture.kubeletVersion;
  const declared =
    fixture.declaredVersion === undefined ? (kubeletVersion ?? '1.34.0') : fixture.declaredVersion;
  if (kubeletVersion !== null) {
    await writeExecutable(
      path.join(rootfs, 'usr/local/bin/kubelet'),
      `#!/bin/sh\nif [ "$1" = "--version" ]; then echo "Kubernetes v${kubeletVersion}"; exit 0; fi\nexit 1\n`,
    );
  }
  if (fixture.containerd !== false) {
    await writeExecutable(
      path.join(rootfs, 'usr/local/bin/containerd'),
      '#!/bin/sh\necho "containerd github.com/containerd/containerd/v2 v2.0.4"\n',
    );
  }
  if (declared !== null) {
    await mkdir(path.dirname(path.join(rootfs, KUBELET_DROP_IN)), { recursive: true });
    await writeFile(
      path.join(rootfs, KUBELET_DROP_IN),
      `[Service]\nEnvironment=AGENTD_KUBERNETES_VERSION=${declared}\nEnvironment="KUBELET_EXTRA_ARGS=--v=2"\n`,
    );
  }
  if (fixture.nspawn !== false) {
    await mkdir(path.dirname(paths.nspawnFile(m)), { recursive: true });
    await writeFile(
      paths.nspawnFile(m),
      '[Exec]\nCapability=all\nPrivateUsers=no\n\n[Network]\nVirtualEthernet=no\n',
    );
  }
  return rootfs;
}
