/**
 * From the agent config to the list of artifacts to install: upstream default URLs, then the
 * `Downloads.<Name>` overrides (`Version` replaces the version, `BaseURL` replaces the upstream
 * host and path prefix, `URL` is a template that wins over `BaseURL`).
 */
import path from 'node:path';
import type { AgentConfig, DownloadOverride } from '../../config/agent-config.js';
import { InvalidConfigError, UnsupportedError } from '../../errors.js';
import { renderUrlTemplate, type TemplateValues } from './url-template.js';
import {
  SUPPORTED_ARCHES,
  type Arch,
  type ArtifactName,
  type ArtifactSpec,
  type ChecksumFormat,
} from './types.js';

/** Upstream base URLs: what `BaseURL` replaces. Mirrors keep the layout below them. */
export const DEFAULT_BASE_URLS = {
  Kubernetes: 'https://dl.k8s.io',
  Crictl: 'https://github.com/kubernetes-sigs/cri-tools/releases/download',
  Containerd: 'https://github.com/containerd/containerd/releases/download',
  Runc: 'https://github.com/opencontainers/runc/releases/download',
  CNI: 'https://github.com/containernetworking/plugins/releases/download',
} as const;

export type DownloadKey = keyof typeof DEFAULT_BASE_URLS;

const KUBE_BINARIES = ['kubelet', 'kubectl', 'kube-proxy'] as const;
const BIN_DIR = 'usr/local/bin';
const CNI_DIR = 'opt/cni/bin';
const EXEC_MODE = 0o755;

/** Source of one download after overrides: the version and how to build its URL. */
interface Source {
  key: DownloadKey;
  version: string;
  override: DownloadOverride | undefined;
}

/**
 * Resolve every artifact for `config` on `arch`: kubelet, kubectl, kube-proxy (version
 * `Cluster.Version`), crictl (`<major>.<minor>.0` of Kubernetes), containerd, runc and the CNI
 * plugins, each with its URL, checksum URL, install plan and version check.
 *
 * Throws `UnsupportedError` for an arch other than amd64/arm64 and `InvalidConfigError` for a
 * `Downloads.*.URL` template that cannot be rendered or does not give an http(s) URL.
 */
export function resolveArtifacts(config: AgentConfig, arch: Arch): ArtifactSpec[] {
  validateArch(arch);
  const downloads = config.Downloads ?? {};
  const kube = source('Kubernetes', config.Cluster.Version, downloads.Kubernetes);
  const crictl = source(
    'Crictl',
    downloads.Crictl?.Version ?? crictlVersionFor(kube.version),
    downloads.Crictl,
  );
  const containerd = source('Containerd', config.CRI.Containerd.Version, downloads.Containerd);
  const runc = source('Runc', config.CRI.Runc.Version, downloads.Runc);
  const cni = source('CNI', config.CNI.PluginVersion, downloads.CNI);

  const specs: ArtifactSpec[] = KUBE_BINARIES.map((bin) => {
    const url = buildUrl(kube, `v${kube.version}/bin/linux/${arch}/${bin}`, {
      args: [kube.version, arch, bin],
      named: { Version: kube.version, Arch: arch, OS: 'linux', Binary: bin },
    });
    return makeSpec(bin, kube.version, url, `${url}.sha256`, 'single', {
      install: { kind: 'file', path: `${BIN_DIR}/${bin}`, mode: EXEC_MODE },
      // Like upstream, kubectl is recognised by the kubelet's version (kubectl has no --version).
      versionCheck: {
        probe: `${BIN_DIR}/${bin === 'kube-proxy' ? 'kube-proxy' : 'kubelet'}`,
        requires: [`${BIN_DIR}/${bin}`],
        format: 'kubernetes',
      },
    });
  });

  const crictlUrl = buildUrl(crictl, `v${crictl.version}/crictl-v${crictl.version}-linux-${arch}.tar.gz`, {
    args: [crictl.version, crictl.version, 'linux', arch],
    named: { Version: crictl.version, Arch: arch, OS: 'linux' },
  });
  specs.push(
    makeSpec('crictl', crictl.version, crictlUrl, `${crictlUrl}.sha256`, 'single', {
      install: archive('', BIN_DIR, ['crictl'], ['crictl']),
      versionCheck: { probe: `${BIN_DIR}/crictl`, requires: [`${BIN_DIR}/crictl`], format: 'crictl' },
    }),
  );

  const containerdUrl = buildUrl(
    containerd,
    `v${containerd.version}/containerd-${containerd.version}-linux-${arch}.tar.gz`,
    {
      args: [containerd.version, containerd.version, arch],
      named: { Version: containerd.version, Arch: arch, OS: 'linux' },
    },
  );
  specs.push(
    makeSpec('containerd', containerd.version, containerdUrl, `${containerdUrl}.sha256sum`, 'single', {
      install: archive('bin', BIN_DIR, undefined, ['containerd']),
      versionCheck: {
        probe: `${BIN_DIR}/containerd`,
        requires: ['containerd', 'containerd-shim-runc-v2', 'ctr'].map((b) => `${BIN_DIR}/${b}`),
        format: 'containerd',
      },
    }),
  );

  const runcUrl = buildUrl(runc, `v${runc.version}/runc.${arch}`, {
    args: [runc.version, arch],
    named: { Version: runc.version, Arch: arch, OS: 'linux' },
  });
  specs.push(
    makeSpec('runc', runc.version, runcUrl, siblingUrl(runcUrl, 'runc.sha256sum'), 'list', {
      install: { kind: 'file', path: `${BIN_DIR}/runc`, mode: EXEC_MODE },
      versionCheck: { probe: `${BIN_DIR}/runc`, requires: [`${BIN_DIR}/runc`], format: 'runc' },
    }),
  );

  const cniUrl = buildUrl(cni, `v${cni.version}/cni-plugins-linux-${arch}-v${cni.version}.tgz`, {
    args: [cni.version, arch, cni.version],
    named: { Version: cni.version, Arch: arch, OS: 'linux' },
  });
  specs.push(
    makeSpec('cni-plugins', cni.version, cniUrl, `${cniUrl}.sha256`, 'single', {
      install: archive('', CNI_DIR, undefined, ['bridge', 'host-local', 'loopback']),
      // The plugins print `CNI bridge plugin v1.5.1` for --version; the others must be present too.
      versionCheck: {
        probe: `${CNI_DIR}/bridge`,
        requires: ['bridge', 'host-local', 'loopback', 'portmap'].map((b) => `${CNI_DIR}/${b}`),
        format: 'cni',
      },
    }),
  );
  return specs;
}

/** cri-tools releases follow Kubernetes minors: `v<major>.<minor>.0`. */
export function crictlVersionFor(kubernetesVersion: string): string {
  const m = /^v?(\d+)\.(\d+)\./.exec(kubernetesVersion);
  if (!m) {
    throw new InvalidConfigError(
      `Cluster.Version: expected a version like 1.34.0 to derive the crictl version, received ${JSON.stringify(kubernetesVersion)}`,
    );
  }
  return `${m[1]}.${m[2]}.0`;
}

function validateArch(arch: string): asserts arch is Arch {
  if (!(SUPPORTED_ARCHES as readonly string[]).includes(arch)) {
    throw new UnsupportedError(
      `artifact architecture: expected one of ${SUPPORTED_ARCHES.join(', ')}, received ${JSON.stringify(arch)}`,
    );
  }
}

function source(key: DownloadKey, defaultVersion: string, override: DownloadOverride | undefined): Source {
  return { key, version: (override?.Version ?? defaultVersion).replace(/^v/, ''), override };
}

/** `URL` template > `BaseURL` + upstream layout > upstream default. */
function buildUrl(src: Source, layout: string, values: TemplateValues): string {
  const field = `Downloads.${src.key}.URL`;
  if (src.override?.URL !== undefined) {
    const url = renderUrlTemplate(field, src.override.URL, values);
    validateHttpUrl(field, src.override.URL, url);
    return url;
  }
  const base = (src.override?.BaseURL ?? DEFAULT_BASE_URLS[src.key]).replace(/\/+$/, '');
  return `${base}/${layout}`;
}

function validateHttpUrl(field: string, template: string, url: string): void {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new InvalidConfigError(
      `${field}: expected a template that renders an http(s) URL, received ${JSON.stringify(template)} (renders ${JSON.stringify(url)})`,
    );
  }
}

/** The URL of another file in the same directory as `url` (runc's release-wide checksum file). */
function siblingUrl(url: string, file: string): string {
  const u = new URL(url);
  u.pathname = `${path.posix.dirname(u.pathname).replace(/\/$/, '')}/${file}`;
  u.search = '';
  u.hash = '';
  return u.toString();
}

function fileNameOf(url: string): string {
  return decodeURIComponent(path.posix.basename(new URL(url).pathname));
}

function archive(
  dir: string,
  destDir: string,
  names: readonly string[] | undefined,
  required: readonly string[],
): ArtifactSpec['install'] {
  return { kind: 'archive', dir, ...(names ? { names } : {}), destDir, mode: EXEC_MODE, required };
}

function makeSpec(
  name: ArtifactName,
  version: string,
  url: string,
  checksumUrl: string,
  checksumFormat: ChecksumFormat,
  rest: Pick<ArtifactSpec, 'install' | 'versionCheck'>,
): ArtifactSpec {
  return { name, version, url, checksumUrl, checksumFormat, checksumEntry: fileNameOf(url), ...rest };
}
