/**
 * The agent config schema (PascalCase, the upstream applied-config format): required fields,
 * defaults filled in one place, normalizations (version `v` prefix, `https://` on the API
 * server), validation of auth, labels and taints, and the strict/lenient top levels.
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_CNI_VERSION,
  DEFAULT_CONTAINERD_VERSION,
  DEFAULT_OCI_IMAGE,
  DEFAULT_RUNC_VERSION,
  REDACTED,
  agentConfigSchema,
  appliedConfigFileSchema,
  redactAgentConfig,
  serializeAgentConfig,
  type AgentConfigInput,
} from '../../../src/config/agent-config.js';
import { TEST_BOOTSTRAP_TOKEN, makeAgentConfig } from '../../support/agent-config.js';
import { configWithout } from '../../support/provision-fixtures.js';

/** The issue paths (dotted) of parsing `input`, or [] when it is valid. */
function issuePaths(input: unknown): string[] {
  const r = agentConfigSchema.safeParse(input);
  return r.success ? [] : r.error.issues.map((i) => i.path.join('.'));
}

function issueAt(input: unknown, dotted: string): string | undefined {
  const r = agentConfigSchema.safeParse(input);
  return r.success ? undefined : r.error.issues.find((i) => i.path.join('.') === dotted)?.message;
}

function withKubelet(patch: Record<string, unknown>): AgentConfigInput {
  const base = makeAgentConfig();
  return { ...base, Kubelet: { ...base.Kubelet, ...patch } as AgentConfigInput['Kubelet'] };
}

describe('agentConfigSchema', () => {
  it('fills every default in one place', () => {
    const c = agentConfigSchema.parse(
      makeAgentConfig({
        Kubelet: { ...makeAgentConfig().Kubelet, Labels: undefined, RegisterWithTaints: undefined },
      }),
    );
    expect(c.CRI).toEqual({
      Containerd: { Version: DEFAULT_CONTAINERD_VERSION },
      Runc: { Version: DEFAULT_RUNC_VERSION },
    });
    expect(c.CNI).toEqual({ PluginVersion: DEFAULT_CNI_VERSION });
    expect(c.OCIImage).toBe(DEFAULT_OCI_IMAGE);
    expect(c.Kubelet.Labels).toEqual({});
    expect(c.Kubelet.RegisterWithTaints).toEqual([]);
    expect(c.Downloads).toBeUndefined();
    expect([DEFAULT_CONTAINERD_VERSION, DEFAULT_RUNC_VERSION, DEFAULT_CNI_VERSION]).toEqual([
      '2.0.4',
      '1.1.12',
      '1.5.1',
    ]);
    expect(DEFAULT_OCI_IMAGE).toBe('ghcr.io/azure/agent-ubuntu2404:v20260427');
  });

  it.each([
    'MachineName',
    'Cluster.CaCertBase64',
    'Cluster.ClusterDNS',
    'Cluster.Version',
    'Kubelet.ApiServer',
    'Kubelet.Auth',
  ])('a config missing %s is refused, naming it', (field) => {
    expect(issuePaths(configWithout(field))).toContain(field);
  });

  it('stores versions without the leading v, wherever they appear', () => {
    const c = agentConfigSchema.parse(
      makeAgentConfig({
        Cluster: { ...makeAgentConfig().Cluster, Version: 'v1.34.0' },
        CRI: { Containerd: { Version: 'v2.1.0' }, Runc: { Version: '1.2.0' } },
        CNI: { PluginVersion: 'v1.6.0' },
        Downloads: { Kubernetes: { Version: 'v1.34.1' } },
      }),
    );
    expect(c.Cluster.Version).toBe('1.34.0');
    expect(c.CRI.Containerd.Version).toBe('2.1.0');
    expect(c.CNI.PluginVersion).toBe('1.6.0');
    expect(c.Downloads?.Kubernetes?.Version).toBe('1.34.1');
    expect(
      issueAt(
        { ...makeAgentConfig(), Cluster: { ...makeAgentConfig().Cluster, Version: 'latest' } },
        'Cluster.Version',
      ),
    ).toMatch(/1\.34\.0/);
  });

  it('adds https:// to an API server without a scheme, keeps one that has it', () => {
    expect(agentConfigSchema.parse(withKubelet({ ApiServer: '10.0.0.1:6443' })).Kubelet.ApiServer).toBe(
      'https://10.0.0.1:6443',
    );
    expect(
      agentConfigSchema.parse(withKubelet({ ApiServer: 'https://api.example.com:6443' })).Kubelet.ApiServer,
    ).toBe('https://api.example.com:6443');
    expect(issuePaths(withKubelet({ ApiServer: '' }))).toContain('Kubelet.ApiServer');
    expect(issuePaths(withKubelet({ ApiServer: 'ftp://x' }))).toContain('Kubelet.ApiServer');
  });

  it('takes exactly one auth form', () => {
    const exec = { command: '/usr/local/bin/token', args: ['--cluster', 'a'] };
    expect(issuePaths(withKubelet({ Auth: { ExecCredential: exec } }))).toEqual([]);
    for (const auth of [{}, { BootstrapToken: TEST_BOOTSTRAP_TOKEN, ExecCredential: exec }]) {
      expect(issueAt(withKubelet({ Auth: auth }), 'Kubelet.Auth')).toBe(
        'exactly one of BootstrapToken and ExecCredential is required',
      );
    }
    expect(
      issueAt(withKubelet({ Auth: { BootstrapToken: 'not-a-token' } }), 'Kubelet.Auth.BootstrapToken'),
    ).toMatch(/bootstrap token/);
  });

  it('validates taints as key=value:Effect', () => {
    const ok = ['dedicated=gpu:NoSchedule', 'node.kubernetes.io/special:NoExecute', 'a=:PreferNoSchedule'];
    expect(issuePaths(withKubelet({ RegisterWithTaints: ok }))).toEqual([]);
    for (const bad of [
      'dedicated=gpu',
      'dedicated=gpu:Sometimes',
      ':NoSchedule',
      'a b=c:NoSchedule',
      // Key and value in Kubernetes label syntax, as the kubelet checks them.
      '_gpu:NoSchedule',
      `${'k'.repeat(64)}:NoSchedule`,
      `k=${'v'.repeat(64)}:NoSchedule`,
    ]) {
      expect(issueAt(withKubelet({ RegisterWithTaints: [bad] }), 'Kubelet.RegisterWithTaints.0'), bad).toBe(
        `expected a taint key[=value]:Effect (key and value in label syntax, Effect one of NoSchedule, PreferNoSchedule, NoExecute), got ${JSON.stringify(bad)}`,
      );
    }
  });

  it('validates label keys and values', () => {
    const ok = { 'unbounded-cloud.io/site': 'dc-1', plain: '', 'a.b/c_d.e-f': 'X_y.z' };
    expect(issuePaths(withKubelet({ Labels: ok }))).toEqual([]);
    expect(issuePaths(withKubelet({ Labels: { 'Bad Key': 'v' } }))).toEqual(['Kubelet.Labels.Bad Key']);
    expect(issuePaths(withKubelet({ Labels: { '/x': 'v' } }))).toEqual(['Kubelet.Labels./x']);
    expect(issuePaths(withKubelet({ Labels: { k: '-starts-with-dash' } }))).toEqual(['Kubelet.Labels.k']);
    expect(issuePaths(withKubelet({ Labels: { k: 'v'.repeat(64) } }))).toEqual(['Kubelet.Labels.k']);
    // The name part of a key is at most 63 characters, its prefix at most 253.
    expect(issuePaths(withKubelet({ Labels: { ['k'.repeat(63)]: 'v' } }))).toEqual([]);
    expect(issuePaths(withKubelet({ Labels: { ['k'.repeat(64)]: 'v' } }))).toEqual([
      `Kubelet.Labels.${'k'.repeat(64)}`,
    ]);
    const longPrefix = `${'p'.repeat(254)}/k`;
    expect(issuePaths(withKubelet({ Labels: { [longPrefix]: 'v' } }))).toEqual([
      `Kubelet.Labels.${longPrefix}`,
    ]);
  });

  it('checks the rest of the fields', () => {
    expect(issuePaths(makeAgentConfig({ MachineName: 'Worker_01' }))).toEqual(['MachineName']);
    expect(
      issuePaths({ ...makeAgentConfig(), Cluster: { ...makeAgentConfig().Cluster, ClusterDNS: 'kube-dns' } }),
    ).toEqual(['Cluster.ClusterDNS']);
    expect(
      issuePaths({
        ...makeAgentConfig(),
        Cluster: { ...makeAgentConfig().Cluster, CaCertBase64: 'bm90IGEgY2VydA==' },
      }),
    ).toEqual(['Cluster.CaCertBase64']);
    expect(issuePaths(makeAgentConfig({ Downloads: { Kubernetes: { BaseURL: 'not a url' } } }))).toEqual([
      'Downloads.Kubernetes.BaseURL',
    ]);
  });

  it('an empty image reference is one issue that says it is empty', () => {
    const r = agentConfigSchema.safeParse(makeAgentConfig({ OCIImage: '' }));
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
      ['OCIImage', 'image reference is empty (expected [registry/]repository[:tag][@sha256:<64 hex>])'],
    ]);
  });

  it('refuses unknown keys at every level', () => {
    expect(issuePaths({ ...makeAgentConfig(), Extra: 1 })).toEqual(['']);
    expect(issuePaths(withKubelet({ Extra: 1 }))).toEqual(['Kubelet']);
  });
});

describe('appliedConfigFileSchema', () => {
  it('keeps top-level fields it does not know (written by the upstream agent)', () => {
    const c = appliedConfigFileSchema.parse({ ...makeAgentConfig(), Attestation: { Enabled: true } });
    expect(c).toMatchObject({ Attestation: { Enabled: true }, MachineName: 'worker-01' });
  });

  it('still validates the fields it knows', () => {
    expect(appliedConfigFileSchema.safeParse(configWithout('Kubelet.Auth')).success).toBe(false);
  });
});

describe('redactAgentConfig and serializeAgentConfig', () => {
  it('replaces the bootstrap token and exec env values, leaving the input alone', () => {
    const c = agentConfigSchema.parse(makeAgentConfig());
    const r = redactAgentConfig(c);
    expect(r.Kubelet.Auth.BootstrapToken).toBe(REDACTED);
    expect(c.Kubelet.Auth.BootstrapToken).toBe(TEST_BOOTSTRAP_TOKEN);
    const exec = agentConfigSchema.parse(
      withKubelet({
        Auth: { ExecCredential: { command: 'tok', env: [{ name: 'SECRET', value: 's3cr3t' }] } },
      }),
    );
    expect(JSON.stringify(redactAgentConfig(exec))).not.toContain('s3cr3t');
    expect(redactAgentConfig(exec).Kubelet.Auth.ExecCredential?.env).toEqual([
      { name: 'SECRET', value: REDACTED },
    ]);
  });

  it('serializes as pretty JSON with two spaces and a final newline', () => {
    const c = agentConfigSchema.parse(makeAgentConfig());
    const text = serializeAgentConfig(c);
    expect(text).toBe(`${JSON.stringify(c, null, 2)}\n`);
    expect(text.split('\n')[1]).toMatch(/^ {2}"MachineName"/);
    expect(agentConfigSchema.parse(JSON.parse(text))).toEqual(c);
  });
});
