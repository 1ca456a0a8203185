/**
 * The small OCI image the local mirror serves (and the system tests push to a real registry):
 * an index with `linux/amd64` and `linux/arm64` manifests over two gzip layers. Layer 1 (shared)
 * is a minimal rootfs skeleton plus optional extra files; layer 2 (per arch) whites out a file of
 * layer 1, makes a directory opaque and records the arch in `etc/agentd-image-arch`.
 */
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { buildTarGz } from './tar-build.js';
import type { TarBuildEntry } from './tar-build.js';

export type OciImageArch = 'amd64' | 'arm64';
export const OCI_IMAGE_ARCHES: readonly OciImageArch[] = ['amd64', 'arm64'];

/** A stored object: its digest, media type and bytes. */
export interface OciBlob {
  digest: string;
  mediaType: string;
  data: Buffer;
}

/** A generated image. */
export interface OciImage {
  /** The image index every tag resolves to. */
  index: OciBlob;
  /** The `linux/<arch>` image manifests. */
  manifests: Record<OciImageArch, OciBlob>;
  /** Every manifest (the index and the per-arch ones) by digest. */
  manifestsByDigest: ReadonlyMap<string, OciBlob>;
  /** Every config and layer blob by digest. */
  blobs: ReadonlyMap<string, OciBlob>;
}

/** Options of `createOciImage`. */
export interface OciImageOptions {
  /** More entries for layer 1 (e.g. `bin/busybox` and a `bin/sh` symlink for an nspawn boot). */
  extraFiles?: readonly TarBuildEntry[];
}

const MT = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
};

export const SIM_OS_RELEASE = [
  'NAME="agentd sim rootfs"',
  'ID=agentd-sim',
  'VERSION_ID="1"',
  'PRETTY_NAME="agentd simulated rootfs"',
  '',
].join('\n');

function blob(mediaType: string, data: Buffer): OciBlob {
  return { digest: `sha256:${createHash('sha256').update(data).digest('hex')}`, mediaType, data };
}

function json(mediaType: string, value: unknown): OciBlob {
  return blob(mediaType, Buffer.from(JSON.stringify(value)));
}

const dir = (p: string): TarBuildEntry => ({ path: p, type: 'directory', mode: 0o755 });

/** Layer 1: the rootfs skeleton, plus what layer 2 removes again. */
function baseLayerEntries(extra: readonly TarBuildEntry[]): TarBuildEntry[] {
  return [
    ...[
      'bin/',
      'etc/',
      'etc/systemd/',
      'etc/systemd/system/',
      'opt/',
      'opt/cni/',
      'opt/cni/bin/',
      'opt/legacy/',
    ].map(dir),
    ...['usr/', 'usr/local/', 'usr/local/bin/', 'var/', 'var/lib/', 'var/lib/kubelet/'].map(dir),
    { path: 'etc/os-release', content: SIM_OS_RELEASE },
    { path: 'etc/hostname', content: 'sim-rootfs\n' },
    { path: 'etc/motd', content: 'removed by the whiteout in layer 2\n' },
    { path: 'opt/legacy/old.conf', content: 'hidden by the opaque directory in layer 2\n' },
    ...extra,
  ];
}

/** Layer 2: a whiteout, an opaque directory with a new file, and the arch marker. */
function archLayerEntries(arch: OciImageArch): TarBuildEntry[] {
  return [
    dir('etc/'),
    { path: 'etc/.wh.motd' },
    { path: 'etc/agentd-image-arch', content: `${arch}\n` },
    dir('opt/legacy/'),
    { path: 'opt/legacy/.wh..wh..opq' },
    { path: 'opt/legacy/new.conf', content: 'written by layer 2\n' },
  ];
}

/** Build the image in memory (deterministic for the same options). */
export function createOciImage(options: OciImageOptions = {}): OciImage {
  const blobs = new Map<string, OciBlob>();
  const manifestsByDigest = new Map<string, OciBlob>();
  const base = blob(MT.layer, buildTarGz(baseLayerEntries(options.extraFiles ?? [])));
  blobs.set(base.digest, base);
  const manifests = {} as Record<OciImageArch, OciBlob>;
  for (const arch of OCI_IMAGE_ARCHES) {
    const top = blob(MT.layer, buildTarGz(archLayerEntries(arch)));
    const layers = [base, top];
    const diffIds = layers.map(
      (l) => `sha256:${createHash('sha256').update(gunzipSync(l.data)).digest('hex')}`,
    );
    const config = json(MT.config, {
      created: '2026-01-01T00:00:00Z',
      architecture: arch,
      os: 'linux',
      config: { Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'] },
      rootfs: { type: 'layers', diff_ids: diffIds },
    });
    blobs.set(top.digest, top);
    blobs.set(config.digest, config);
    const descriptor = (b: OciBlob): { mediaType: string; digest: string; size: number } => ({
      mediaType: b.mediaType,
      digest: b.digest,
      size: b.data.length,
    });
    const manifest = json(MT.manifest, {
      schemaVersion: 2,
      mediaType: MT.manifest,
      config: descriptor(config),
      layers: layers.map(descriptor),
    });
    manifests[arch] = manifest;
    manifestsByDigest.set(manifest.digest, manifest);
  }
  const index = json(MT.index, {
    schemaVersion: 2,
    mediaType: MT.index,
    manifests: OCI_IMAGE_ARCHES.map((arch) => ({
      mediaType: MT.manifest,
      digest: manifests[arch].digest,
      size: manifests[arch].data.length,
      platform: { architecture: arch, os: 'linux' },
    })),
  });
  manifestsByDigest.set(index.digest, index);
  return { index, manifests, manifestsByDigest, blobs };
}

/**
 * Write `image` as an OCI image layout directory (`oci-layout`, `index.json`, `blobs/sha256/…`)
 * whose `index.json` names the image index `tag`, for `skopeo copy oci:<dir>:<tag> …`.
 */
export async function writeOciLayout(
  dir: string,
  image: OciImage,
  options: { tag?: string } = {},
): Promise<void> {
  const blobDir = path.join(dir, 'blobs', 'sha256');
  await mkdir(blobDir, { recursive: true });
  for (const b of [...image.blobs.values(), ...image.manifestsByDigest.values()]) {
    await writeFile(path.join(blobDir, b.digest.slice('sha256:'.length)), b.data);
  }
  await writeFile(path.join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  const index = {
    schemaVersion: 2,
    mediaType: MT.index,
    manifests: [
      {
        mediaType: MT.index,
        digest: image.index.digest,
        size: image.index.data.length,
        annotations: { 'org.opencontainers.image.ref.name': options.tag ?? 'latest' },
      },
    ],
  };
  await writeFile(path.join(dir, 'index.json'), JSON.stringify(index));
}
