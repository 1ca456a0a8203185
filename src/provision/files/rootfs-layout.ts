/**
 * Where agentd puts its files inside a machine: the paths as the machine sees them (absolute,
 * used in unit files and kubelet flags) and as written into the rootfs (relative to it).
 */

/** Absolute paths inside the machine. */
export const IN_MACHINE = Object.freeze({
  kubeletBin: '/usr/local/bin/kubelet',
  containerdBin: '/usr/local/bin/containerd',
  containerdSocket: '/run/containerd/containerd.sock',
  clientCaFile: '/etc/kubernetes/pki/apiserver-client-ca.crt',
  bootstrapKubeconfig: '/var/lib/kubelet/bootstrap-kubeconfig',
  /** Written by kubelet itself once TLS bootstrap has issued its client certificate. */
  kubeconfig: '/var/lib/kubelet/kubeconfig',
  kubeletConfig: '/var/lib/kubelet/config.yaml',
  /** Static pods' manifests (kubelet's `staticPodPath`), created 0700 as upstream. */
  staticPodDir: '/etc/kubernetes/manifests/',
  volumePluginDir: '/etc/kubernetes/volumeplugins',
  /** Operators' kubelet hook: `KUBELET_EXTRA_ARGS=…` (and `KUBELET_TUNING_ARGS`), optional. */
  kubeletEnvFile: '/etc/default/kubelet',
});

/** Paths relative to the machine rootfs (`/var/lib/machines/<m>`). */
export const ROOTFS_FILES = Object.freeze({
  hostname: 'etc/hostname',
  resolvConf: 'etc/resolv.conf',
  resolvedMask: 'etc/systemd/system/systemd-resolved.service',
  modulesLoad: 'etc/modules-load.d/kubernetes.conf',
  kmsgTmpfiles: 'etc/tmpfiles.d/kmsg.conf',
  containerdConfig: 'etc/containerd/config.toml',
  containerdService: 'etc/systemd/system/containerd.service',
  kubeletService: 'etc/systemd/system/kubelet.service',
  /** Kubelet's command line; carries `Environment=AGENTD_KUBERNETES_VERSION=<version>`. */
  kubeletDropIn: 'etc/systemd/system/kubelet.service.d/10-agentd.conf',
  /** Node registration flags: labels, taints, cluster DNS, client CA. */
  kubeletNodeDropIn: 'etc/systemd/system/kubelet.service.d/20-node.conf',
  clientCa: 'etc/kubernetes/pki/apiserver-client-ca.crt',
  bootstrapKubeconfig: 'var/lib/kubelet/bootstrap-kubeconfig',
  /** kubelet's kubeconfig: written by agentd for an exec credential, by kubelet after TLS bootstrap. */
  kubeconfig: 'var/lib/kubelet/kubeconfig',
  kubeletConfig: 'var/lib/kubelet/config.yaml',
  staticPodDir: 'etc/kubernetes/manifests',
  /** agentd's boot target for a machine in standby (src/host/standby-boot.ts). */
  standbyTarget: 'etc/systemd/system/agentd-standby.target',
});

/** The line of `10-agentd.conf` the simulated host reads to learn the kubelet version. */
export function kubernetesVersionLine(version: string): string {
  return `Environment=AGENTD_KUBERNETES_VERSION=${version}`;
}
