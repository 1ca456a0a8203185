/**
 * The OS files of a machine (provision phase): the host's identity and DNS, systemd-resolved
 * masked (the machine shares the host network namespace, where the host's resolver already
 * runs), the kernel modules kubelet needs, and `/dev/kmsg` for kubelet's OOM watcher.
 */
import type { HostInfo } from './host-info.js';
import { ROOTFS_FILES } from './rootfs-layout.js';
import { writeRootfsEntries } from './rootfs-entry.js';
import type { RootfsEntry } from './rootfs-entry.js';

const HEADER = '# Written by agentd; rewritten on every update.\n';

/** Kernel modules containerd's overlay snapshotter and kube-proxy/CNI bridging need. */
export function renderModulesLoad(): string {
  return `${HEADER}overlay\nbr_netfilter\n`;
}

/**
 * nspawn gives the machine no `/dev/kmsg`, and kubelet refuses to start without it (its OOM
 * watcher reads it): point it at the console instead.
 */
export function renderKmsgTmpfiles(): string {
  return `${HEADER}L /dev/kmsg - - - - /dev/console\n`;
}

/** What `writeOsFiles` puts into a rootfs, in writing order. */
export function renderOsFiles(host: HostInfo): RootfsEntry[] {
  const resolvConf =
    host.resolvConf.endsWith('\n') || host.resolvConf === '' ? host.resolvConf : `${host.resolvConf}\n`;
  return [
    { kind: 'file', path: ROOTFS_FILES.hostname, mode: 0o644, content: `${host.hostname}\n`, secret: false },
    { kind: 'file', path: ROOTFS_FILES.resolvConf, mode: 0o644, content: resolvConf, secret: false },
    { kind: 'symlink', path: ROOTFS_FILES.resolvedMask, target: '/dev/null' },
    {
      kind: 'file',
      path: ROOTFS_FILES.modulesLoad,
      mode: 0o644,
      content: renderModulesLoad(),
      secret: false,
    },
    {
      kind: 'file',
      path: ROOTFS_FILES.kmsgTmpfiles,
      mode: 0o644,
      content: renderKmsgTmpfiles(),
      secret: false,
    },
  ];
}

/** Write the OS files (hostname, resolv.conf, resolved masked, modules, kmsg) into `rootfs`. */
export async function writeOsFiles(rootfs: string, host: HostInfo): Promise<void> {
  await writeRootfsEntries(rootfs, renderOsFiles(host));
}
