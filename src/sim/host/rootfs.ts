/**
 * What the sim reads from a machine's rootfs: whether containerd and kubelet could run, and which
 * units are enabled (the `multi-user.target.wants` symlinks, as `systemctl enable` leaves them,
 * so a freshly provisioned rootfs starts with nothing enabled).
 */
import { constants } from 'node:fs';
import { access, lstat, mkdir, readFile, stat, symlink } from 'node:fs/promises';
import path from 'node:path';
import type { SimUnitName } from './state.js';

/** Drop-in in which the staged kubelet declares the Kubernetes version it was configured for. */
export const KUBELET_DROP_IN = 'etc/systemd/system/kubelet.service.d/10-agentd.conf';
const WANTS_DIR = 'etc/systemd/system/multi-user.target.wants';
const VERSION_LINE = /^\s*Environment="?AGENTD_KUBERNETES_VERSION=v?([^"\s]+)"?\s*$/m;
/** A kubelet that does not answer `--version` in this long is treated as broken. */
const VERSION_TIMEOUT_MS = 10_000;

/** Whether a unit could run, and if not, why. */
export interface UnitCheck {
  ok: boolean;
  /** Set when !ok: what is missing or wrong, for logs and tests. */
  reason?: string;
}

async function isExecutableFile(file: string): Promise<boolean> {
  try {
    const info = await stat(file);
    if (!info.isFile()) return false;
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** True when `p` exists (a symlink counts, even a dangling one). */
export async function pathExists(p: string): Promise<boolean> {
  try {
    await lstat(p);
    return true;
  } catch {
    return false;
  }
}

/** Whether `unit` is enabled in the rootfs. */
export async function isUnitEnabled(rootfs: string, unit: SimUnitName): Promise<boolean> {
  return pathExists(path.join(rootfs, WANTS_DIR, unit));
}

/** `systemctl enable`: link the unit into multi-user.target.wants inside the rootfs. */
export async function enableUnit(rootfs: string, unit: SimUnitName): Promise<void> {
  const link = path.join(rootfs, WANTS_DIR, unit);
  if (await pathExists(link)) return;
  await mkdir(path.dirname(link), { recursive: true });
  // The target is the path inside the machine, exactly like systemctl writes it.
  await symlink(`/etc/systemd/system/${unit}`, link);
}

/** containerd can run when its binary is in the rootfs. */
export async function checkContainerd(rootfs: string): Promise<UnitCheck> {
  return (await isExecutableFile(path.join(rootfs, 'usr/local/bin/containerd')))
    ? { ok: true }
    : { ok: false, reason: 'usr/local/bin/containerd is missing or not executable' };
}

/** Whether the kubelet binary is there at all (without it the unit fails instead of crash-looping). */
export async function kubeletBinaryPresent(rootfs: string): Promise<boolean> {
  return isExecutableFile(path.join(rootfs, 'usr/local/bin/kubelet'));
}

/**
 * kubelet can run when `usr/local/bin/kubelet --version` prints `Kubernetes v<V>` and the staged
 * drop-in declares `Environment=AGENTD_KUBERNETES_VERSION=<V>`.
 */
export async function checkKubelet(rootfs: string): Promise<UnitCheck> {
  const binary = path.join(rootfs, 'usr/local/bin/kubelet');
  if (!(await isExecutableFile(binary))) {
    return { ok: false, reason: 'usr/local/bin/kubelet is missing or not executable' };
  }
  let dropIn: string;
  try {
    dropIn = await readFile(path.join(rootfs, KUBELET_DROP_IN), 'utf8');
  } catch {
    return { ok: false, reason: `${KUBELET_DROP_IN} is missing` };
  }
  const declared = VERSION_LINE.exec(dropIn)?.[1];
  if (!declared) {
    return {
      ok: false,
      reason: `${KUBELET_DROP_IN} has no Environment=AGENTD_KUBERNETES_VERSION=<version> line`,
    };
  }
  // Loaded on demand: most sim commands never run a kubelet, and each sim executable starts afresh.
  const { execa } = await import('execa');
  const result = await execa(binary, ['--version'], {
    reject: false,
    timeout: VERSION_TIMEOUT_MS,
    stdin: 'ignore',
  });
  const printed = result.stdout.trim();
  if (result.exitCode !== 0) {
    return {
      ok: false,
      reason: `usr/local/bin/kubelet --version failed: ${result.shortMessage ?? 'no exit code'}`,
    };
  }
  if (printed !== `Kubernetes v${declared}`) {
    return {
      ok: false,
      reason: `usr/local/bin/kubelet --version prints ${JSON.stringify(printed)}, the drop-in declares ${declared}`,
    };
  }
  return { ok: true };
}
