/**
 * Contract types of the artifact installer: what one downloadable artifact is (URL, checksum,
 * where it goes in the rootfs, how its installed version is recognised) and the seams the
 * installer takes.
 */
import type { Writable } from 'node:stream';

/** CPU architectures agentd downloads artifacts for (Go's GOARCH names, as in the URLs). */
export const SUPPORTED_ARCHES = ['amd64', 'arm64'] as const;
export type Arch = (typeof SUPPORTED_ARCHES)[number];

/** Every artifact installed into a machine rootfs besides the OCI image. */
export const ARTIFACT_NAMES = [
  'kubelet',
  'kubectl',
  'kube-proxy',
  'crictl',
  'containerd',
  'runc',
  'cni-plugins',
] as const;
export type ArtifactName = (typeof ARTIFACT_NAMES)[number];

/**
 * How the checksum file is laid out:
 * - `single`: a file that belongs to this one artifact (`<url>.sha256`, `<url>.sha256sum`): bare
 *   hex, or `<hex>  <file name>` lines. With one line its file name is not checked (mirrors may
 *   rename files); with several lines the line for `checksumEntry` is used.
 * - `list`: a release-wide file listing every asset (runc's `runc.sha256sum`): the line whose
 *   file name is `checksumEntry` is used, and a file without it is an error.
 */
export type ChecksumFormat = 'single' | 'list';

/** A single executable copied to `path` (relative to the rootfs) with `mode`. */
export interface FileInstall {
  kind: 'file';
  path: string;
  mode: number;
}

/**
 * A gzip tarball from which only regular files that are direct children of `dir` (`''` = the
 * archive root; a leading `./` is ignored) are taken, optionally only those named in `names`.
 * Each lands in `destDir` (relative to the rootfs) under its base name with `mode`. `required`
 * names must be present in the archive.
 */
export interface ArchiveInstall {
  kind: 'archive';
  dir: string;
  names?: readonly string[];
  destDir: string;
  mode: number;
  required: readonly string[];
}

export type InstallPlan = FileInstall | ArchiveInstall;

/**
 * How the version output of an installed binary is matched:
 * - `kubernetes`: `Kubernetes v1.34.0` (kubelet, kube-proxy)
 * - `containerd`: a token equal to `v<ver>` (`containerd github.com/containerd/containerd/v2 v2.0.4 <sha>`)
 * - `runc`: first line `runc version <ver>`
 * - `crictl`: `crictl version v<ver>`
 * - `cni`: a token equal to `v<ver>` (`CNI bridge plugin v1.5.1`)
 */
export type VersionOutputFormat = 'kubernetes' | 'containerd' | 'runc' | 'crictl' | 'cni';

/**
 * When an artifact counts as already installed: every path in `requires` (relative to the
 * rootfs) is a file, and `<probe> --version` prints the wanted version in `format`.
 */
export interface VersionCheck {
  probe: string;
  requires: readonly string[];
  format: VersionOutputFormat;
}

/** One artifact to install: resolved from the agent config by `resolveArtifacts`. */
export interface ArtifactSpec {
  name: ArtifactName;
  /** Version without a leading `v`. */
  version: string;
  url: string;
  checksumUrl: string;
  checksumFormat: ChecksumFormat;
  /** File name looked up in the checksum file (the base name of `url`). */
  checksumEntry: string;
  install: InstallPlan;
  versionCheck: VersionCheck;
}

/** The subset of a pino logger the installer uses. */
export interface ArtifactLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

/**
 * Test seam: open a file for writing. `durable` asks for an fsync before close: set for files
 * written into the rootfs (a machine boots from them), not for cache entries (their digest is
 * checked every time they are used, and a damaged one is downloaded again).
 */
export type OpenWrite = (file: string, options: { mode: number; durable: boolean }) => Writable;

/** Runs `<binaryPath> --version`; resolves with its output, or null when it cannot tell. */
export type VersionProbe = (binaryPath: string) => Promise<string | null>;
