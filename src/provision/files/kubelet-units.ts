/**
 * kubelet's unit and drop-ins inside a machine. The unit only names the binary; its command
 * line comes from the drop-ins (as kubeadm does), so each concern has one file:
 * `10-agentd.conf` the credentials, config file and version, `20-node.conf` how the node
 * registers (labels, taints, cluster DNS, client CA).
 */
import { InvalidConfigError } from '../../errors.js';
import type { AgentConfig } from '../../config/agent-config.js';
import { usesTlsBootstrap } from './kubelet-config.js';
import { IN_MACHINE, kubernetesVersionLine } from './rootfs-layout.js';
import { environmentLine, validateExpandedArg } from './unit-syntax.js';

const HEADER = '# Written by agentd; rewritten on every update.\n';

/**
 * `/etc/systemd/system/kubelet.service`. As upstream's: `/etc/default/kubelet` is read when it
 * exists (its `KUBELET_EXTRA_ARGS` and `KUBELET_TUNING_ARGS` end the command line), restarts
 * start after 1 s and back off to 60 s over 10 steps, and exit code 143 (SIGTERM) is a stop.
 */
export function renderKubeletService(): string {
  return `${HEADER}[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target containerd.service
After=network-online.target containerd.service
StartLimitIntervalSec=0

[Service]
EnvironmentFile=-${IN_MACHINE.kubeletEnvFile}
ExecStart=${IN_MACHINE.kubeletBin}
Restart=always
RestartSec=1
RestartSteps=10
RestartMaxDelaySec=60
SuccessExitStatus=143

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
    environmentLine('KUBELET_KUBECONFIG_ARGS', kubeconfigArgs(config), 'kubelet kubeconfig arguments') +
    '\n' +
    environmentLine(
      'KUBELET_CONFIG_ARGS',
      `--config=${IN_MACHINE.kubeletConfig}`,
      'kubelet config argument',
    ) +
    '\n' +
    // The empty ExecStart= clears the unit's own before this one replaces it.
    'ExecStart=\n' +
    // The operator's variables come last, so their flags win over agentd's.
    `ExecStart=${IN_MACHINE.kubeletBin} $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_NODE_ARGS $KUBELET_TUNING_ARGS $KUBELET_EXTRA_ARGS\n`
  );
}

/**
 * `--bootstrap-kubeconfig` only with a bootstrap token; with an exec credential agentd writes
 * the kubeconfig itself, as upstream did, and kubelet never bootstraps.
 */
function kubeconfigArgs(config: AgentConfig): string {
  const kubeconfig = `--kubeconfig=${IN_MACHINE.kubeconfig}`;
  return usesTlsBootstrap(config)
    ? `--bootstrap-kubeconfig=${IN_MACHINE.bootstrapKubeconfig} ${kubeconfig}`
    : kubeconfig;
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
