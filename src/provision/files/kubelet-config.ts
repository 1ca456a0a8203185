/**
 * kubelet's configuration file, the cluster CA it trusts and the kubeconfig it joins with.
 * With a bootstrap token that is the bootstrap kubeconfig (TLS bootstrap: kubelet exchanges
 * the token for a client certificate and writes its own kubeconfig). With an exec credential
 * it is kubelet's kubeconfig itself, as upstream wrote it: the plugin is the node's identity,
 * the same in every machine, so a repave needs no certificate signing request.
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

/** The TLS cipher suites upstream's kubelet serves with (its `--tls-cipher-suites`). */
export const KUBELET_TLS_CIPHER_SUITES = Object.freeze([
  'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256',
  'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
  'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305',
  'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
  'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305',
  'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384',
  'TLS_RSA_WITH_AES_256_GCM_SHA384',
  'TLS_RSA_WITH_AES_128_GCM_SHA256',
]);

/** True when kubelet joins with TLS bootstrap (a bootstrap token), false with an exec credential. */
export function usesTlsBootstrap(config: AgentConfig): boolean {
  return config.Kubelet.Auth.BootstrapToken !== undefined;
}

/**
 * `/var/lib/kubelet/config.yaml`: a KubeletConfiguration. The settings upstream passed as
 * flags are fields here (docs/compatibility.md, "The machine's insides").
 */
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
    // Only a certificate from TLS bootstrap is rotated; an exec credential is not one.
    rotateCertificates: usesTlsBootstrap(config),
    // Upstream's flags, as their KubeletConfiguration fields.
    staticPodPath: IN_MACHINE.staticPodDir,
    volumePluginDir: IN_MACHINE.volumePluginDir,
    tlsCipherSuites: [...KUBELET_TLS_CIPHER_SUITES],
    protectKernelDefaults: true,
    eventRecordQPS: 0,
    runtimeRequestTimeout: '15m0s',
    readOnlyPort: 0,
    streamingConnectionIdleTimeout: '4h0m0s',
    nodeStatusUpdateFrequency: '10s',
    podPidsLimit: -1,
    cgroupsPerQOS: true,
    enforceNodeAllocatable: ['pods'],
    resolvConf: '/etc/resolv.conf',
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
 * The kubeconfig kubelet joins with (mode 0600: it holds the credential):
 * `/var/lib/kubelet/bootstrap-kubeconfig` for a bootstrap token, `/var/lib/kubelet/kubeconfig`
 * for an exec credential. The server is `Kubelet.ApiServer`, trusted through the cluster CA
 * embedded as data.
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
