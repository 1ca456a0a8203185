import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { agentConfigSchema, type AgentConfig } from '../../../../src/config/agent-config.js';
import {
  renderBootstrapKubeconfig,
  renderClientCa,
  renderKubeletConfig,
} from '../../../../src/provision/files/kubelet-config.js';
import { makeAgentConfig, TEST_BOOTSTRAP_TOKEN, TEST_CA_PEM } from '../../../support/agent-config.js';

function config(auth?: AgentConfig['Kubelet']['Auth'], apiServer = 'https://10.0.0.1:6443'): AgentConfig {
  const base = makeAgentConfig();
  return agentConfigSchema.parse({
    ...base,
    Kubelet: { ...base.Kubelet, ApiServer: apiServer, ...(auth ? { Auth: auth } : {}) },
  });
}

describe('client CA', () => {
  it('is the PEM decoded from Cluster.CaCertBase64', () => {
    expect(renderClientCa(config())).toBe(TEST_CA_PEM);
  });

  it('refuses base64 that is not a PEM certificate', () => {
    const bad = structuredClone(config());
    bad.Cluster.CaCertBase64 = Buffer.from('not a cert').toString('base64');
    expect(() => renderClientCa(bad)).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
  });
});

describe('kubelet config.yaml', () => {
  it('is a KubeletConfiguration with systemd cgroups, cluster DNS, client CA, containerd and local healthz', () => {
    const doc = parse(renderKubeletConfig(config())) as Record<string, unknown>;
    expect(doc).toMatchObject({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      cgroupDriver: 'systemd',
      clusterDNS: ['10.96.0.10'],
      authentication: { x509: { clientCAFile: '/etc/kubernetes/pki/apiserver-client-ca.crt' } },
      containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
      healthzBindAddress: '127.0.0.1',
      healthzPort: 10248,
    });
  });

  it("carries upstream's kubelet flags as their KubeletConfiguration fields", () => {
    const doc = parse(renderKubeletConfig(config())) as Record<string, unknown>;
    expect(doc).toMatchObject({
      staticPodPath: '/etc/kubernetes/manifests/',
      volumePluginDir: '/etc/kubernetes/volumeplugins',
      protectKernelDefaults: true,
      eventRecordQPS: 0,
      runtimeRequestTimeout: '15m0s',
      readOnlyPort: 0,
      streamingConnectionIdleTimeout: '4h0m0s',
      podPidsLimit: -1,
      enforceNodeAllocatable: ['pods'],
    });
    expect(doc.tlsCipherSuites).toEqual([
      'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256',
      'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256',
      'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305',
      'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
      'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305',
      'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384',
      'TLS_RSA_WITH_AES_256_GCM_SHA384',
      'TLS_RSA_WITH_AES_128_GCM_SHA256',
    ]);
  });

  it('rotates certificates only when kubelet joins with TLS bootstrap', () => {
    const token = parse(renderKubeletConfig(config())) as Record<string, unknown>;
    const exec = parse(renderKubeletConfig(config({ ExecCredential: { command: 'tok' } }))) as Record<
      string,
      unknown
    >;
    expect(token.rotateCertificates).toBe(true);
    expect(exec.rotateCertificates).toBe(false);
  });

  it('renders an IPv6 cluster DNS address as a string', () => {
    const c = structuredClone(config());
    c.Cluster.ClusterDNS = 'fd00::a';
    expect((parse(renderKubeletConfig(c)) as { clusterDNS: unknown }).clusterDNS).toEqual(['fd00::a']);
  });
});

describe('bootstrap kubeconfig', () => {
  it('points at the API server with the cluster CA and the bootstrap token', () => {
    const doc = parse(renderBootstrapKubeconfig(config(undefined, '10.0.0.9:6443'))) as Record<
      string,
      unknown
    >;
    expect(doc).toEqual({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'default',
          cluster: {
            server: 'https://10.0.0.9:6443',
            'certificate-authority-data': Buffer.from(TEST_CA_PEM).toString('base64'),
          },
        },
      ],
      contexts: [{ name: 'default', context: { cluster: 'default', user: 'kubelet-bootstrap' } }],
      'current-context': 'default',
      preferences: {},
      users: [{ name: 'kubelet-bootstrap', user: { token: TEST_BOOTSTRAP_TOKEN } }],
    });
  });

  it('uses the exec plugin instead of a token with ExecCredential auth', () => {
    const c = config({
      ExecCredential: {
        command: '/usr/local/bin/get-token',
        args: ['--audience', 'kube'],
        env: [{ name: 'TENANT', value: 'x y "z"' }],
        provideClusterInfo: true,
      },
    });
    const doc = parse(renderBootstrapKubeconfig(c)) as { users: { user: Record<string, unknown> }[] };
    expect(doc.users).toHaveLength(1);
    expect(doc.users[0]!.user).toEqual({
      exec: {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: '/usr/local/bin/get-token',
        args: ['--audience', 'kube'],
        env: [{ name: 'TENANT', value: 'x y "z"' }],
        provideClusterInfo: true,
        interactiveMode: 'Never',
      },
    });
  });

  it('keeps an exec apiVersion and interactiveMode given in the config', () => {
    const c = config({
      ExecCredential: {
        command: 'tok',
        apiVersion: 'client.authentication.k8s.io/v1beta1',
        interactiveMode: 'IfAvailable',
      },
    });
    const doc = parse(renderBootstrapKubeconfig(c)) as {
      users: { user: { exec: Record<string, unknown> } }[];
    };
    expect(doc.users[0]!.user.exec).toEqual({
      apiVersion: 'client.authentication.k8s.io/v1beta1',
      command: 'tok',
      interactiveMode: 'IfAvailable',
    });
  });
});
