import { describe, expect, it } from 'vitest';
import { agentConfigSchema, type AgentConfigInput } from '../../../../src/config/agent-config.js';
import type { AgentError } from '../../../../src/errors.js';
import { crictlVersionFor, resolveArtifacts } from '../../../../src/provision/artifacts/resolve.js';
import type { Arch, ArtifactSpec } from '../../../../src/provision/artifacts/types.js';
import { makeAgentConfig } from '../../../support/agent-config.js';

function resolve(
  overrides: Partial<AgentConfigInput> = {},
  arch: Arch = 'amd64',
): Record<string, ArtifactSpec> {
  const config = agentConfigSchema.parse({ ...makeAgentConfig(), ...overrides });
  return Object.fromEntries(resolveArtifacts(config, arch).map((s) => [s.name, s]));
}

function resolveError(overrides: Partial<AgentConfigInput>, arch = 'amd64'): AgentError {
  const config = agentConfigSchema.parse({ ...makeAgentConfig(), ...overrides });
  try {
    resolveArtifacts(config, arch as Arch);
  } catch (err) {
    return err as AgentError;
  }
  throw new Error('expected resolveArtifacts to throw');
}

describe('resolveArtifacts: upstream defaults', () => {
  it('lists every artifact with the upstream URLs and checksum URLs', () => {
    const specs = resolve();
    expect(Object.keys(specs)).toEqual([
      'kubelet',
      'kubectl',
      'kube-proxy',
      'crictl',
      'containerd',
      'runc',
      'cni-plugins',
    ]);
    expect(specs.kubelet).toMatchObject({
      version: '1.34.0',
      url: 'https://dl.k8s.io/v1.34.0/bin/linux/amd64/kubelet',
      checksumUrl: 'https://dl.k8s.io/v1.34.0/bin/linux/amd64/kubelet.sha256',
      checksumFormat: 'single',
      checksumEntry: 'kubelet',
      install: { kind: 'file', path: 'usr/local/bin/kubelet', mode: 0o755 },
    });
    expect(specs['kube-proxy']!.url).toBe('https://dl.k8s.io/v1.34.0/bin/linux/amd64/kube-proxy');
    expect(specs.crictl).toMatchObject({
      version: '1.34.0',
      url: 'https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.34.0/crictl-v1.34.0-linux-amd64.tar.gz',
      checksumUrl:
        'https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.34.0/crictl-v1.34.0-linux-amd64.tar.gz.sha256',
      install: {
        kind: 'archive',
        dir: '',
        names: ['crictl'],
        destDir: 'usr/local/bin',
        required: ['crictl'],
      },
    });
    expect(specs.containerd).toMatchObject({
      version: '2.0.4',
      url: 'https://github.com/containerd/containerd/releases/download/v2.0.4/containerd-2.0.4-linux-amd64.tar.gz',
      checksumUrl:
        'https://github.com/containerd/containerd/releases/download/v2.0.4/containerd-2.0.4-linux-amd64.tar.gz.sha256sum',
      install: { kind: 'archive', dir: 'bin', destDir: 'usr/local/bin', mode: 0o755 },
    });
    expect(specs.runc).toMatchObject({
      version: '1.1.12',
      url: 'https://github.com/opencontainers/runc/releases/download/v1.1.12/runc.amd64',
      checksumUrl: 'https://github.com/opencontainers/runc/releases/download/v1.1.12/runc.sha256sum',
      checksumFormat: 'list',
      checksumEntry: 'runc.amd64',
      install: { kind: 'file', path: 'usr/local/bin/runc', mode: 0o755 },
    });
    expect(specs['cni-plugins']).toMatchObject({
      version: '1.5.1',
      url: 'https://github.com/containernetworking/plugins/releases/download/v1.5.1/cni-plugins-linux-amd64-v1.5.1.tgz',
      checksumUrl:
        'https://github.com/containernetworking/plugins/releases/download/v1.5.1/cni-plugins-linux-amd64-v1.5.1.tgz.sha256',
      install: { kind: 'archive', dir: '', destDir: 'opt/cni/bin' },
    });
  });

  it('uses the arch in every URL and the arm64 runc entry', () => {
    const specs = resolve({}, 'arm64');
    for (const spec of Object.values(specs)) expect(spec.url).toContain('arm64');
    expect(specs.runc!.checksumEntry).toBe('runc.arm64');
  });

  it('derives crictl from the Kubernetes minor', () => {
    const specs = resolve({ Cluster: { ...makeAgentConfig().Cluster, Version: 'v1.35.7' } });
    expect(specs.kubelet!.version).toBe('1.35.7');
    expect(specs.crictl!.version).toBe('1.35.0');
    expect(crictlVersionFor('1.33.12')).toBe('1.33.0');
  });

  it('refuses an unsupported arch with UNSUPPORTED naming it', () => {
    const err = resolveError({}, 'riscv64');
    expect(err.code).toBe('UNSUPPORTED');
    expect(err.message).toContain('riscv64');
  });

  it('recognises each artifact by the right binary and output format', () => {
    const specs = resolve();
    expect(specs.kubectl!.versionCheck).toEqual({
      probe: 'usr/local/bin/kubelet',
      requires: ['usr/local/bin/kubectl'],
      format: 'kubernetes',
    });
    expect(specs.containerd!.versionCheck.requires).toContain('usr/local/bin/ctr');
    expect(specs['cni-plugins']!.versionCheck).toMatchObject({ probe: 'opt/cni/bin/bridge', format: 'cni' });
  });
});

describe('resolveArtifacts: Downloads overrides', () => {
  it('Version replaces the version of that artifact only', () => {
    const specs = resolve({
      Downloads: {
        Kubernetes: { Version: '1.33.2' },
        Containerd: { Version: 'v1.7.20' },
        Runc: { Version: '1.2.0' },
        CNI: { Version: '1.6.0' },
        Crictl: { Version: '1.32.1' },
      },
    });
    expect(specs.kubelet!.url).toBe('https://dl.k8s.io/v1.33.2/bin/linux/amd64/kubelet');
    expect(specs.containerd!.url).toContain('/v1.7.20/containerd-1.7.20-linux-amd64.tar.gz');
    expect(specs.runc!.url).toContain('/v1.2.0/runc.amd64');
    expect(specs['cni-plugins']!.url).toContain('/v1.6.0/cni-plugins-linux-amd64-v1.6.0.tgz');
    expect(specs.crictl!.version).toBe('1.32.1');
  });

  it('crictl follows an overridden Kubernetes version unless it has its own', () => {
    expect(resolve({ Downloads: { Kubernetes: { Version: '1.33.2' } } }).crictl!.version).toBe('1.33.0');
  });

  it('BaseURL replaces the host and path prefix and keeps the layout', () => {
    const specs = resolve({
      Downloads: {
        Kubernetes: { BaseURL: 'https://mirror.example/k8s/' },
        Crictl: { BaseURL: 'https://mirror.example/crictl' },
        Containerd: { BaseURL: 'https://mirror.example/containerd' },
        Runc: { BaseURL: 'https://mirror.example/runc' },
        CNI: { BaseURL: 'http://10.0.0.5:8080/cni' },
      },
    });
    expect(specs.kubelet!.url).toBe('https://mirror.example/k8s/v1.34.0/bin/linux/amd64/kubelet');
    expect(specs.kubelet!.checksumUrl).toBe(
      'https://mirror.example/k8s/v1.34.0/bin/linux/amd64/kubelet.sha256',
    );
    expect(specs.crictl!.url).toBe('https://mirror.example/crictl/v1.34.0/crictl-v1.34.0-linux-amd64.tar.gz');
    expect(specs.containerd!.url).toBe(
      'https://mirror.example/containerd/v2.0.4/containerd-2.0.4-linux-amd64.tar.gz',
    );
    expect(specs.runc!.url).toBe('https://mirror.example/runc/v1.1.12/runc.amd64');
    expect(specs.runc!.checksumUrl).toBe('https://mirror.example/runc/v1.1.12/runc.sha256sum');
    expect(specs['cni-plugins']!.url).toBe(
      'http://10.0.0.5:8080/cni/v1.5.1/cni-plugins-linux-amd64-v1.5.1.tgz',
    );
  });

  it('URL templates take the upstream printf arguments per artifact and win over BaseURL', () => {
    const specs = resolve({
      Downloads: {
        Kubernetes: { BaseURL: 'https://ignored.example', URL: 'https://m.example/k/v%s/%s/%s' },
        Containerd: { URL: 'https://m.example/c/v%s/containerd-%s-linux-%s.tar.gz' },
        Runc: { URL: 'https://m.example/r/%[2]s/runc-%[1]s' },
        CNI: { URL: 'https://m.example/cni/v%s/cni-plugins-linux-%s-v%s.tgz' },
        Crictl: { URL: 'https://m.example/crictl/v%s/crictl-v%s-%s-%s.tar.gz' },
      },
    });
    expect(specs.kubelet!.url).toBe('https://m.example/k/v1.34.0/amd64/kubelet');
    expect(specs.kubectl!.url).toBe('https://m.example/k/v1.34.0/amd64/kubectl');
    expect(specs.kubelet!.checksumUrl).toBe('https://m.example/k/v1.34.0/amd64/kubelet.sha256');
    expect(specs.containerd!.url).toBe('https://m.example/c/v2.0.4/containerd-2.0.4-linux-amd64.tar.gz');
    expect(specs.containerd!.checksumUrl).toBe(
      'https://m.example/c/v2.0.4/containerd-2.0.4-linux-amd64.tar.gz.sha256sum',
    );
    expect(specs.runc!.url).toBe('https://m.example/r/amd64/runc-1.1.12');
    expect(specs.runc!.checksumUrl).toBe('https://m.example/r/amd64/runc.sha256sum');
    expect(specs.runc!.checksumEntry).toBe('runc-1.1.12');
    expect(specs['cni-plugins']!.url).toBe('https://m.example/cni/v1.5.1/cni-plugins-linux-amd64-v1.5.1.tgz');
    expect(specs.crictl!.url).toBe('https://m.example/crictl/v1.34.0/crictl-v1.34.0-linux-amd64.tar.gz');
  });

  it('URL templates accept named placeholders', () => {
    const specs = resolve({
      Downloads: {
        Kubernetes: { URL: 'https://m.example/{{.Version}}/{{ .Arch }}/{{.Binary}}' },
        Runc: { URL: 'https://m.example/runc/{{.Version}}/{{.OS}}-{{.Arch}}' },
      },
    });
    expect(specs['kube-proxy']!.url).toBe('https://m.example/1.34.0/amd64/kube-proxy');
    expect(specs.runc!.url).toBe('https://m.example/runc/1.1.12/linux-amd64');
  });

  it('an unknown placeholder is INVALID_CONFIG naming the field and the placeholder', () => {
    const err = resolveError({
      Downloads: { Containerd: { URL: 'https://m.example/{{.Binary}}/{{.Version}}' } },
    });
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.message).toContain('Downloads.Containerd.URL');
    expect(err.message).toContain('{{.Binary}}');
  });

  it('a template expression that is not a placeholder is INVALID_CONFIG', () => {
    const err = resolveError({ Downloads: { CNI: { URL: 'https://m.example/{{ if .X }}' } } });
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.message).toContain('{{ if .X }}');
  });

  it('an unsupported verb or a missing argument is INVALID_CONFIG', () => {
    const verb = resolveError({ Downloads: { Runc: { URL: 'https://m.example/%d/runc' } } });
    expect(verb.code).toBe('INVALID_CONFIG');
    expect(verb.message).toContain('"%d"');
    const missing = resolveError({ Downloads: { Runc: { URL: 'https://m.example/%s/%s/%s' } } });
    expect(missing.code).toBe('INVALID_CONFIG');
    expect(missing.message).toContain('only 2');
  });

  it('%% is a literal percent sign', () => {
    const specs = resolve({ Downloads: { Runc: { URL: 'https://m.example/a%%20b/%s' } } });
    expect(specs.runc!.url).toBe('https://m.example/a%20b/1.1.12');
  });

  it('a template that does not render an http(s) URL is INVALID_CONFIG', () => {
    const err = resolveError({ Downloads: { Kubernetes: { URL: 'ftp://m.example/%s' } } });
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.message).toContain('Downloads.Kubernetes.URL');
  });
});
