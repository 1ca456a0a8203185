/**
 * Everything a machine needs to boot into a node (stage phase): containerd and kubelet
 * configuration, their units, the cluster CA and the bootstrap kubeconfig. Also the list of
 * what provision and stage write into a rootfs, for dry-run plans.
 */
import type { AgentConfig } from '../../config/agent-config.js';
import { renderContainerdConfig, renderContainerdService } from './containerd-files.js';
import type { HostInfo } from './host-info.js';
import {
  renderBootstrapKubeconfig,
  renderClientCa,
  renderKubeletConfig,
  usesTlsBootstrap,
} from './kubelet-config.js';
import { renderKubeletDropIn, renderKubeletNodeDropIn, renderKubeletService } from './kubelet-units.js';
import { renderOsFiles } from './os-files.js';
import { ROOTFS_FILES } from './rootfs-layout.js';
import { renderStandbyTarget } from '../../host/standby-boot.js';
import { writeRootfsEntries } from './rootfs-entry.js';
import { ensureRootfsDir } from './rootfs-path.js';
import type { RootfsEntry } from './rootfs-entry.js';

/** What `writeStagingFiles` puts into a rootfs, in writing order. */
export function renderStagingFiles(config: AgentConfig): RootfsEntry[] {
  const file = (path: string, content: string, mode = 0o644, secret = false): RootfsEntry => ({
    kind: 'file',
    path,
    mode,
    content,
    secret,
  });
  return [
    file(ROOTFS_FILES.containerdConfig, renderContainerdConfig()),
    file(ROOTFS_FILES.containerdService, renderContainerdService()),
    file(ROOTFS_FILES.clientCa, renderClientCa(config)),
    file(ROOTFS_FILES.kubeletConfig, renderKubeletConfig(config)),
    file(
      usesTlsBootstrap(config) ? ROOTFS_FILES.bootstrapKubeconfig : ROOTFS_FILES.kubeconfig,
      renderBootstrapKubeconfig(config),
      0o600,
      true,
    ),
    file(ROOTFS_FILES.kubeletService, renderKubeletService()),
    file(ROOTFS_FILES.kubeletDropIn, renderKubeletDropIn(config)),
    file(ROOTFS_FILES.kubeletNodeDropIn, renderKubeletNodeDropIn(config)),
    file(ROOTFS_FILES.standbyTarget, renderStandbyTarget()),
  ];
}

/**
 * Write containerd and kubelet configuration, units, CA and kubeconfig into `rootfs`, and
 * make the static pods' directory (0700, as upstream; kubelet reads it, nothing is in it).
 */
export async function writeStagingFiles(rootfs: string, config: AgentConfig): Promise<void> {
  // Rendered in full before the first write, so a bad value fails with nothing half-written.
  await writeRootfsEntries(rootfs, renderStagingFiles(config));
  await ensureRootfsDir(rootfs, ROOTFS_FILES.staticPodDir, 0o700);
}

/** One rootfs path in a dry-run plan (no content: some of it is secret). */
export interface StagedFile {
  /** Path relative to the machine rootfs, e.g. `var/lib/kubelet/bootstrap-kubeconfig`. */
  readonly path: string;
  readonly kind: 'file' | 'symlink';
  /** File mode; absent for symlinks. */
  readonly mode?: number;
  /** Link target, for symlinks. */
  readonly target?: string;
  /** The file holds a credential. */
  readonly secret: boolean;
  /** The update phase that writes it: `provision` (OS files) or `stage`. */
  readonly phase: 'provision' | 'stage';
}

// Only the paths and modes of the OS files matter for a plan: any host gives the same list.
const PLACEHOLDER_HOST: HostInfo = { hostname: 'host', resolvConf: '', devices: [] };

function toStaged(entry: RootfsEntry, phase: StagedFile['phase']): StagedFile {
  return entry.kind === 'symlink'
    ? { path: entry.path, kind: 'symlink', target: entry.target, secret: false, phase }
    : { path: entry.path, kind: 'file', mode: entry.mode, secret: entry.secret, phase };
}

/** The rootfs paths `writeOsFiles` and `writeStagingFiles` produce for `config`, with their modes. */
export function stagedFileList(config: AgentConfig): StagedFile[] {
  return [
    ...renderOsFiles(PLACEHOLDER_HOST).map((e) => toStaged(e, 'provision')),
    ...renderStagingFiles(config).map((e) => toStaged(e, 'stage')),
  ];
}
