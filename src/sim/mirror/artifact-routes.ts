/**
 * URL layouts of the mirror, the same as upstream below a path prefix named after the upstream
 * host (`/dl.k8s.io/…`, `/github.com/<org>/<repo>/releases/download/…`), for any version.
 */
import {
  KUBE_BINARIES,
  MIRROR_ARCHES,
  type KubeBinary,
  type MirrorArch,
  type MirrorAsset,
} from './artifact-content.js';

/** Path prefixes under which each upstream is mirrored (append to the mirror's base URL). */
export const MIRROR_PREFIXES = {
  Kubernetes: '/dl.k8s.io',
  Crictl: '/github.com/kubernetes-sigs/cri-tools/releases/download',
  Containerd: '/github.com/containerd/containerd/releases/download',
  Runc: '/github.com/opencontainers/runc/releases/download',
  CNI: '/github.com/containernetworking/plugins/releases/download',
} as const;

/** What a path asks for. */
export type MirrorRoute =
  | { kind: 'asset'; asset: MirrorAsset }
  /** A per-asset checksum file: bare hex (`.sha256` of dl.k8s.io, crictl) or `<hex>  <name>` lines. */
  | { kind: 'checksum'; asset: MirrorAsset; style: 'bare' | 'named' }
  /** runc's release-wide `runc.sha256sum`, listing every arch. */
  | { kind: 'runc-sums'; version: string }
  | { kind: 'blob'; bytes: number; checksum: boolean };

const V = '(\\d+\\.\\d+\\.\\d+(?:[-+][0-9A-Za-z.-]+)?)';
const A = `(${MIRROR_ARCHES.join('|')})`;
const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const KUBE_RE = new RegExp(
  `^${esc(MIRROR_PREFIXES.Kubernetes)}/v${V}/bin/linux/${A}/(${KUBE_BINARIES.join('|')})(\\.sha256)?$`,
);
const CRICTL_RE = new RegExp(
  `^${esc(MIRROR_PREFIXES.Crictl)}/v${V}/crictl-v${V}-linux-${A}\\.tar\\.gz(\\.sha256)?$`,
);
const CONTAINERD_RE = new RegExp(
  `^${esc(MIRROR_PREFIXES.Containerd)}/v${V}/containerd-${V}-linux-${A}\\.tar\\.gz(\\.sha256sum)?$`,
);
const RUNC_RE = new RegExp(`^${esc(MIRROR_PREFIXES.Runc)}/v${V}/runc\\.${A}$`);
const RUNC_SUMS_RE = new RegExp(`^${esc(MIRROR_PREFIXES.Runc)}/v${V}/runc\\.sha256sum$`);
const CNI_RE = new RegExp(
  `^${esc(MIRROR_PREFIXES.CNI)}/v${V}/cni-plugins-linux-${A}-v${V}\\.tgz(\\.sha256)?$`,
);
const BLOB_RE = /^\/bench\/blob-(\d+)\.bin(\.sha256)?$/;

/** The versions a route needs to exist (checked against the missing-version pattern). */
export function routeVersions(route: MirrorRoute): string[] {
  if (route.kind === 'blob') return [];
  if (route.kind === 'runc-sums') return [route.version];
  return [route.asset.version];
}

function g(m: RegExpExecArray, i: number): string {
  return m[i] ?? '';
}

/** Parse a request path; null when the path is not one of the mirror's layouts. */
export function parseMirrorPath(pathname: string): MirrorRoute | null {
  let m = KUBE_RE.exec(pathname);
  if (m) {
    const asset: MirrorAsset = {
      artifact: 'kube',
      version: g(m, 1),
      arch: m[2] as MirrorArch,
      binary: m[3] as KubeBinary,
    };
    return m[4] ? { kind: 'checksum', asset, style: 'bare' } : { kind: 'asset', asset };
  }
  m = CRICTL_RE.exec(pathname);
  if (m && m[1] === m[2]) {
    const asset: MirrorAsset = { artifact: 'crictl', version: g(m, 1), arch: m[3] as MirrorArch };
    return m[4] ? { kind: 'checksum', asset, style: 'bare' } : { kind: 'asset', asset };
  }
  m = CONTAINERD_RE.exec(pathname);
  if (m && m[1] === m[2]) {
    const asset: MirrorAsset = { artifact: 'containerd', version: g(m, 1), arch: m[3] as MirrorArch };
    return m[4] ? { kind: 'checksum', asset, style: 'named' } : { kind: 'asset', asset };
  }
  m = RUNC_RE.exec(pathname);
  if (m) return { kind: 'asset', asset: { artifact: 'runc', version: g(m, 1), arch: m[2] as MirrorArch } };
  m = RUNC_SUMS_RE.exec(pathname);
  if (m) return { kind: 'runc-sums', version: g(m, 1) };
  m = CNI_RE.exec(pathname);
  if (m && m[1] === m[3]) {
    const asset: MirrorAsset = { artifact: 'cni', version: g(m, 1), arch: m[2] as MirrorArch };
    return m[4] ? { kind: 'checksum', asset, style: 'named' } : { kind: 'asset', asset };
  }
  m = BLOB_RE.exec(pathname);
  if (m) return { kind: 'blob', bytes: Number(m[1]), checksum: m[2] !== undefined };
  return null;
}
