/**
 * The machine images of the real-host suite, as an OCI image layout built from the same Debian
 * base the hosts boot (so a machine is a real systemd system with D-Bus and perl), cached next
 * to the base tarball:
 *
 * - `v1`: the base: boots, and runs the kubelet/containerd stand-ins agentd installs.
 * - `v2`: the base plus a layer that writes `/etc/agentd-test-image` (`v2`), so a blue/green
 *   switch to it is a change of image as well as of version. That layer is zstd-compressed
 *   (`tar+zstd`), so the switch also proves the release applies zstd layers.
 * - `noboot`: the base plus a layer of OCI whiteouts that delete systemd and `/sbin/init`, so
 *   `systemd-nspawn --boot` finds no init: a machine that cannot boot.
 * - `gpu`: the base plus stand-ins for the NVIDIA container toolkit: `/usr/bin/nvidia-ctk`
 *   writes its arguments and the linker's view of `libcuda` into the CDI spec it is told to
 *   generate, and `/usr/bin/nvidia-container-runtime` exists.
 * - `kubelet-hooks`: the base plus an operator's kubelet hooks kept in the image, as
 *   docs/operations.md ("The kubelet's hooks") tells operators to keep them: an
 *   `/etc/default/kubelet` (`KUBELET_HOOKS.envFile`) and a static pod manifest
 *   (`KUBELET_HOOKS.manifest`), so a repave to it shows both in the new machine's kubelet.
 *
 * Device nodes of the base are left out of the layer (container images carry none; nspawn
 * populates /dev), and agentd refuses them in a layer anyway.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
import { hostArch } from '../../../src/provision/provisioner.js';
import { buildOnce } from '../build-lock.js';
import { RECIPE_ID, ensureBaseTarball, realHostCacheDir } from './rootfs.js';
import { runOk } from './run.js';

/** Bump when what the images contain changes: the cache key. */
const IMAGES_REV = 4;
export const MACHINE_IMAGE_TAGS = ['v1', 'v2', 'noboot', 'gpu', 'kubelet-hooks'] as const;
export type MachineImageTag = (typeof MACHINE_IMAGE_TAGS)[number];

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

/** A layer's descriptor and its diff ID (the digest of its uncompressed tar). */
interface Layer {
  descriptor: Descriptor;
  diffId: string;
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

/** Move `file` into the layout's blob store under its digest; returns its descriptor. */
async function addBlobFile(layout: string, file: string, mediaType: string): Promise<Descriptor> {
  const hex = await sha256File(file);
  const size = (await stat(file)).size;
  await rename(file, path.join(layout, 'blobs', 'sha256', hex));
  return { mediaType, digest: `sha256:${hex}`, size };
}

async function addBlobJson(layout: string, value: unknown, mediaType: string): Promise<Descriptor> {
  const bytes = Buffer.from(JSON.stringify(value));
  const hex = createHash('sha256').update(bytes).digest('hex');
  await writeFile(path.join(layout, 'blobs', 'sha256', hex), bytes);
  return { mediaType, digest: `sha256:${hex}`, size: bytes.length };
}

/** A small layer from `files` (path → content; an empty content with a `.wh.` name is a whiteout). */
async function smallLayer(
  work: string,
  name: string,
  files: Record<string, string | { content: string; mode: number }>,
): Promise<string> {
  const dir = path.join(work, name);
  for (const [rel, file] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    const { content, mode } = typeof file === 'string' ? { content: file, mode: 0o644 } : file;
    await writeFile(path.join(dir, rel), content, { mode });
    await chmod(path.join(dir, rel), mode);
  }
  const file = path.join(work, `${name}.tar`);
  await tar.c({ cwd: dir, file, portable: true }, Object.keys(files));
  return file;
}

/** `nvidia-ctk cdi generate --output=FILE …`: a CDI spec naming what the linker finds of libcuda. */
const NVIDIA_CTK_STAND_IN = [
  '#!/bin/sh',
  'set -eu',
  'out=',
  'for a in "$@"; do case "$a" in --output=*) out="${a#--output=}" ;; esac; done',
  '[ "$1 $2" = "cdi generate" ] && [ -n "$out" ] || { echo "nvidia-ctk stand-in: $*" >&2; exit 2; }',
  '{',
  '  echo "cdiVersion: 0.5.0"',
  '  echo "kind: nvidia.com/gpu"',
  '  echo "# args: $*"',
  '  ldconfig -p | grep libcuda | sed "s/^/# ldconfig: /"',
  '} > "$out"',
  '',
].join('\n');

/** What the `kubelet-hooks` image holds: the machine paths and their contents. */
export const KUBELET_HOOKS = Object.freeze({
  envFile: {
    path: '/etc/default/kubelet',
    content: [
      "# An operator's kubelet hooks, kept in the image (docs/operations.md).",
      'KUBELET_TUNING_ARGS=--kube-api-qps=50',
      'KUBELET_EXTRA_ARGS="--max-pods=42 --v=3"',
      '',
    ].join('\n'),
    /** The words systemd makes of the two variables, in the order they end kubelet's command line. */
    argv: ['--kube-api-qps=50', '--max-pods=42', '--v=3'],
  },
  manifest: {
    path: '/etc/kubernetes/manifests/image-static-pod.yaml',
    content: [
      'apiVersion: v1',
      'kind: Pod',
      'metadata: { name: image-static-pod, namespace: kube-system }',
      'spec: { containers: [{ name: pause, image: mcr.microsoft.com/oss/kubernetes/pause:3.9 }] }',
      '',
    ].join('\n'),
  },
});

let building: Promise<string> | undefined;

/** The cached OCI layout holding the tags; built when missing (about 10 s from the base). */
export function ensureMachineImageLayout(): Promise<string> {
  return (building ??= (async () => {
    const layout = path.join(realHostCacheDir(), `machine-images-${RECIPE_ID}-r${IMAGES_REV}-${hostArch()}`);
    if (existsSync(path.join(layout, 'index.json'))) return layout;
    const base = await ensureBaseTarball();
    // One builder across the test processes; the others wait and use its layout.
    await buildOnce(
      layout,
      () => existsSync(path.join(layout, 'index.json')),
      () => buildLayout(layout, base),
    );
    return layout;
  })().catch((err: unknown) => {
    building = undefined;
    throw err;
  }));
}

/** Build the tags' layout from the base tarball into `layout`. */
async function buildLayout(layout: string, base: string): Promise<void> {
  const work = await mkdtemp(`${layout}.tmp-`);
  try {
    const tmpLayout = path.join(work, 'layout');
    await mkdir(path.join(tmpLayout, 'blobs', 'sha256'), { recursive: true });
    const tree = path.join(work, 'tree');
    await mkdir(tree);
    await runOk('tar', ['--zstd', '-xpf', base, '--numeric-owner', '--exclude=./dev/*', '-C', tree], {
      timeoutMs: 300_000,
    });
    const baseTar = path.join(work, 'base.tar');
    await runOk('tar', ['--numeric-owner', '-cf', baseTar, '-C', tree, '.'], { timeoutMs: 300_000 });
    await rm(tree, { recursive: true, force: true });

    const layerType = 'application/vnd.oci.image.layer.v1.tar';
    /** An uncompressed layer: its digest is its diff ID. */
    const plain = async (file: string): Promise<Layer> => {
      const descriptor = await addBlobFile(tmpLayout, file, layerType);
      return { descriptor, diffId: descriptor.digest };
    };
    /** A zstd-compressed layer, by the zstd tool (the suite's runner may have no zstd in Node). */
    const zstd = async (file: string): Promise<Layer> => {
      const diffId = `sha256:${await sha256File(file)}`;
      await runOk('zstd', ['-q', '--rm', file, '-o', `${file}.zst`]);
      return { descriptor: await addBlobFile(tmpLayout, `${file}.zst`, `${layerType}+zstd`), diffId };
    };
    const baseLayer = await plain(baseTar);
    const extra: Record<MachineImageTag, Layer[]> = {
      v1: [],
      v2: [await zstd(await smallLayer(work, 'v2', { 'etc/agentd-test-image': 'v2\n' }))],
      gpu: [
        await plain(
          await smallLayer(work, 'gpu', {
            'usr/bin/nvidia-ctk': {
              content: NVIDIA_CTK_STAND_IN,
              mode: 0o755,
            },
            'usr/bin/nvidia-container-runtime': {
              content: '#!/bin/sh\nexec /usr/local/bin/runc "$@"\n',
              mode: 0o755,
            },
          }),
        ),
      ],
      'kubelet-hooks': [
        await plain(
          await smallLayer(work, 'kubelet-hooks', {
            [KUBELET_HOOKS.envFile.path.slice(1)]: KUBELET_HOOKS.envFile.content,
            [KUBELET_HOOKS.manifest.path.slice(1)]: KUBELET_HOOKS.manifest.content,
          }),
        ),
      ],
      noboot: [
        await plain(
          await smallLayer(work, 'noboot', {
            'usr/lib/systemd/.wh.systemd': '',
            'usr/sbin/.wh.init': '',
          }),
        ),
      ],
    };
    const manifests = [];
    for (const tag of MACHINE_IMAGE_TAGS) {
      const layers = [baseLayer, ...extra[tag]];
      const config = await addBlobJson(
        tmpLayout,
        {
          architecture: hostArch(),
          os: 'linux',
          config: {},
          rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) },
        },
        'application/vnd.oci.image.config.v1+json',
      );
      const manifest = await addBlobJson(
        tmpLayout,
        {
          schemaVersion: 2,
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          config,
          layers: layers.map((l) => l.descriptor),
        },
        'application/vnd.oci.image.manifest.v1+json',
      );
      manifests.push({ ...manifest, annotations: { 'org.opencontainers.image.ref.name': tag } });
    }
    await writeFile(path.join(tmpLayout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    await writeFile(
      path.join(tmpLayout, 'index.json'),
      JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests }),
    );
    await rename(tmpLayout, layout);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
