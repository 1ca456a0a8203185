/**
 * kubelet's unit and drop-ins inside a machine. The unit only names the binary; its command
 * line comes from the drop-ins (as kubeadm does), so each concern has one file:
 * `10-agentd.conf` the credentials, config file and version, `20-node.conf` how the node
 * registers (labels, taints, cluster DNS, client CA).
 */
import { InvalidConfigError } from '../../errors.js';
import type { AgentConfig } from '../../config/agent-config.js';
import { IN_MACHINE, kubernetesVersionLine } from './rootfs-layout.js';
import { environmentLine, validateExpandedArg } from './unit-syntax.js';

const HEADER = '# Written by agentd; rewritten on every update.\n';

/** `/etc/systemd/system/kubelet.service`. */
export function renderKubeletService(): string {
  return `${HEADER}[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target containerd.service
After=network-online.target containerd.service
StartLimitIntervalSec=0

[Service]
ExecStart=${IN_MACHINE.kubeletBin}
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
`;
}

/**
 * `kubelet.service.d/10-agentd.conf`: kubelet's command line. Its
 * `Environment=AGENTD_KUBERNETES_VERSION=<version>` line is a contract with the simulated
 * host, which reads the version from it.
 */
export function renderKubeletDropIn(config: AgentConfig): string {
  const version = config.Cluster.Version;
  if (!/^[0-9A-Za-z.+-]+$/.test(version)) {
    throw new InvalidConfigError(
      `Cluster.Version: expected a version like 1.34.0, got ${JSON.stringify(version)}`,
    );
  }
  return (
    HEADER +
    '[Service]\n' +
    `${kubernetesVersionLine(version)}\n` +
    environmentLine(
      'KUBELET_KUBECONFIG_ARGS',
      `--bootstrap-kubeconfig=${IN_MACHINE.bootstrapKubeconfig} --kubeconfig=${IN_MACHINE.kubeconfig}`,
      'kubelet kubeconfig arguments',
    ) +
    '\n' +
    environmentLine(
      'KUBELET_CONFIG_ARGS',
      `--config=${IN_MACHINE.kubeletConfig}`,
      'kubelet config argument',
    ) +
    '\n' +
    // The empty ExecStart= clears the unit's own before this one replaces it.
    'ExecStart=\n' +
    `ExecStart=${IN_MACHINE.kubeletBin} $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_NODE_ARGS\n`
  );
}

/** kubelet's node-registration flags, in a fixed order with labels sorted by key. */
export function kubeletNodeArgs(config: AgentConfig): string[] {
  const args: string[] = [];
  const labels = Object.entries(config.Kubelet.Labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [key, value] of labels) {
    // `,` separates labels and `=` key from value in the flag's own syntax.
    if (/[,=]/.test(key) || /[,=]/.test(value)) {
      throw new InvalidConfigError(
        `Kubelet.Labels: expected keys and values without "," or "=", got ${JSON.stringify(`${key}=${value}`)}`,
      );
    }
  }
  if (labels.length > 0) {
    const flag = `--node-labels=${labels.map(([k, v]) => `${k}=${v}`).join(',')}`;
    args.push(validateExpandedArg(flag, 'Kubelet.Labels'));
  }
  const taints = config.Kubelet.RegisterWithTaints;
  if (taints.length > 0) {
    for (const taint of taints) {
      if (taint.includes(',')) {
        throw new InvalidConfigError(
          `Kubelet.RegisterWithTaints: expected key=value:Effect without ",", got ${JSON.stringify(taint)}`,
        );
      }
    }
    args.push(
      validateExpandedArg(`--register-with-taints=${taints.join(',')}`, 'Kubelet.RegisterWithTaints'),
    );
  }
  args.push(validateExpandedArg(`--cluster-dns=${config.Cluster.ClusterDNS}`, 'Cluster.ClusterDNS'));
  args.push(`--client-ca-file=${IN_MACHINE.clientCaFile}`);
  return args;
}

/**
 * `kubelet.service.d/20-node.conf`: labels, taints, cluster DNS and client CA as flags, the
 * way upstream passes them (the last two are also in config.yaml, with the same values).
 */
export function renderKubeletNodeDropIn(config: AgentConfig): string {
  return (
    HEADER +
    '[Service]\n' +
    environmentLine('KUBELET_NODE_ARGS', kubeletNodeArgs(config).join(' '), 'kubelet node arguments') +
    '\n'
  );
}
