/**
 * kubelet's configuration file, the cluster CA it trusts and the bootstrap kubeconfig it
 * joins with (TLS bootstrap: it exchanges the bootstrap credential for a client certificate
 * and writes its own kubeconfig).
 */
import { stringify } from 'yaml';
import { InvalidConfigError } from '../../errors.js';
import type { AgentConfig } from '../../config/agent-config.js';
import { IN_MACHINE } from './rootfs-layout.js';

/** The exec-credential API version kubeconfigs get when the config names none. */
export const DEFAULT_EXEC_API_VERSION = 'client.authentication.k8s.io/v1';

const YAML_OPTIONS = { lineWidth: 0 } as const;
const HEADER = '# Written by agentd; rewritten on every update.\n';

/** The cluster CA PEM decoded from `Cluster.CaCertBase64`, ending in a newline. */
export function renderClientCa(config: AgentConfig): string {
  const pem = Buffer.from(config.Cluster.CaCertBase64, 'base64').toString('utf8');
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new InvalidConfigError(
      'Cluster.CaCertBase64: expected the base64 of a PEM certificate, got no BEGIN CERTIFICATE line',
    );
  }
  return pem.endsWith('\n') ? pem : `${pem}\n`;
}

/** `/var/lib/kubelet/config.yaml`: a KubeletConfiguration. */
export function renderKubeletConfig(config: AgentConfig): string {
  const doc = {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // containerd runs runc with SystemdCgroup = true: both must use the same driver.
    cgroupDriver: 'systemd',
    containerRuntimeEndpoint: `unix://${IN_MACHINE.containerdSocket}`,
    clusterDNS: [config.Cluster.ClusterDNS],
    clusterDomain: 'cluster.local',
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: IN_MACHINE.clientCaFile },
    },
    authorization: { mode: 'Webhook' },
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    rotateCertificates: true,
  };
  return HEADER + stringify(doc, YAML_OPTIONS);
}

/** The kubeconfig `user` entry: the bootstrap token, or the exec plugin. */
function kubeconfigUser(config: AgentConfig): Record<string, unknown> {
  const { BootstrapToken, ExecCredential } = config.Kubelet.Auth;
  if (BootstrapToken !== undefined) return { token: BootstrapToken };
  if (ExecCredential === undefined) {
    throw new InvalidConfigError('Kubelet.Auth: expected BootstrapToken or ExecCredential, got neither');
  }
  const { command, args, env, apiVersion, ...rest } = ExecCredential;
  return {
    exec: {
      // Further exec fields the config carries (installHint, provideClusterInfo…) pass through.
      ...rest,
      apiVersion: apiVersion ?? DEFAULT_EXEC_API_VERSION,
      command,
      ...(args === undefined ? {} : { args }),
      ...(env === undefined ? {} : { env }),
      // Required by the v1 API; kubelet runs with no terminal to ask on.
      interactiveMode: typeof rest.interactiveMode === 'string' ? rest.interactiveMode : 'Never',
    },
  };
}

/**
 * `/var/lib/kubelet/bootstrap-kubeconfig` (mode 0600: it holds the credential). The server
 * is `Kubelet.ApiServer`, trusted through the cluster CA embedded as data.
 */
export function renderBootstrapKubeconfig(config: AgentConfig): string {
  const caData = Buffer.from(renderClientCa(config), 'utf8').toString('base64');
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'default',
        cluster: { server: config.Kubelet.ApiServer, 'certificate-authority-data': caData },
      },
    ],
    contexts: [{ name: 'default', context: { cluster: 'default', user: 'kubelet-bootstrap' } }],
    'current-context': 'default',
    preferences: {},
    users: [{ name: 'kubelet-bootstrap', user: kubeconfigUser(config) }],
  };
  return stringify(doc, YAML_OPTIONS);
}
