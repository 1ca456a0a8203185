/**
 * containerd's configuration and unit inside a machine. The configuration uses schema
 * version 3, the one containerd 2.x reads natively (2.x still converts version 2 on every
 * start, and the CRI plugin was split into `io.containerd.cri.v1.images` / `.runtime` there).
 */
import { IN_MACHINE } from './rootfs-layout.js';

export const SANDBOX_IMAGE = 'mcr.microsoft.com/oss/kubernetes/pause:3.9';
export const CONTAINERD_METRICS_ADDRESS = '0.0.0.0:10257';
/** Drop-ins containerd merges over config.toml: operators' and the GPU runtime's. */
export const CONTAINERD_IMPORTS = '/etc/containerd/conf.d/*.toml';
/** Registry hosts' configuration (mirrors, credentials, CAs), one directory per registry. */
export const CONTAINERD_CERTS_DIR = '/etc/containerd/certs.d';
/** The header upstream's containerd sends to every registry, kept for registries that count it. */
export const REGISTRY_SOURCE_HEADER = Object.freeze({
  name: 'X-Meta-Source-Client',
  value: 'unbounded-kube/kubelet',
});

/** One CRI runtime entry: runc with systemd cgroups and no new session keyring per container. */
function runcRuntime(name: string): string {
  const table = `plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.${name}`;
  return `      [${table}]
        runtime_type = 'io.containerd.runc.v2'

        [${table}.options]
          BinaryName = '/usr/local/bin/runc'
          NoNewKeyring = true
          SystemdCgroup = true
`;
}

/** `/etc/containerd/config.toml` (all values are constants: nothing here comes from the config). */
export function renderContainerdConfig(): string {
  return `# Written by agentd; rewritten on every update.
version = 3
imports = ['${CONTAINERD_IMPORTS}']
oom_score = 0

[grpc]
  address = '${IN_MACHINE.containerdSocket}'

[metrics]
  address = '${CONTAINERD_METRICS_ADDRESS}'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '${SANDBOX_IMAGE}'

    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '${CONTAINERD_CERTS_DIR}'

      [plugins.'io.containerd.cri.v1.images'.registry.headers]
        ${REGISTRY_SOURCE_HEADER.name} = ['${REGISTRY_SOURCE_HEADER.value}']

  [plugins.'io.containerd.cri.v1.runtime']
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'

${runcRuntime('runc')}
${runcRuntime('untrusted')}
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dir = '/opt/cni/bin'
      conf_dir = '/etc/cni/net.d'
`;
}

/**
 * `/etc/systemd/system/containerd.service`, after containerd's own unit (binaries in
 * /usr/local/bin). The restart backoff is upstream's: 1 s growing to 60 s over 10 restarts
 * (systemd 254+; older systemd ignores the two keys and restarts every second).
 */
export function renderContainerdService(): string {
  return `# Written by agentd; rewritten on every update.
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target local-fs.target dbus.service
# Restarts every second at first: without this, five failures in 10 s would stop them.
StartLimitIntervalSec=0

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=${IN_MACHINE.containerdBin} --config /etc/containerd/config.toml
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=1
RestartSteps=10
RestartMaxDelaySec=60
LimitNOFILE=infinity
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
`;
}
