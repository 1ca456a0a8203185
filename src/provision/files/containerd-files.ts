/**
 * containerd's configuration and unit inside a machine. The configuration uses schema
 * version 3, the one containerd 2.x reads natively (2.x still converts version 2 on every
 * start, and the CRI plugin was split into `io.containerd.cri.v1.images` / `.runtime` there).
 */
import { IN_MACHINE } from './rootfs-layout.js';

export const SANDBOX_IMAGE = 'mcr.microsoft.com/oss/kubernetes/pause:3.9';
export const CONTAINERD_METRICS_ADDRESS = '0.0.0.0:10257';

/** `/etc/containerd/config.toml` (all values are constants: nothing here comes from the config). */
export function renderContainerdConfig(): string {
  return `# Written by agentd; rewritten on every update.
version = 3

[grpc]
  address = '${IN_MACHINE.containerdSocket}'

[metrics]
  address = '${CONTAINERD_METRICS_ADDRESS}'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '${SANDBOX_IMAGE}'

  [plugins.'io.containerd.cri.v1.runtime']
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'

        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '/usr/local/bin/runc'
          SystemdCgroup = true

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dir = '/opt/cni/bin'
      conf_dir = '/etc/cni/net.d'
`;
}

/** `/etc/systemd/system/containerd.service`, after containerd's own unit (binaries in /usr/local/bin). */
export function renderContainerdService(): string {
  return `# Written by agentd; rewritten on every update.
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target local-fs.target dbus.service

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=${IN_MACHINE.containerdBin} --config /etc/containerd/config.toml
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
`;
}
