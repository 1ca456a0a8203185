/**
 * The production provisioner: OCI rootfs, verified artifacts, OS/nspawn/staging files, wired
 * from the pieces under `src/provision/`. Caches live under `<state-dir>/cache/`.
 */
import { mkdir, statfs } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { AgentError, UnsupportedError, describeError } from '../errors.js';
import type { AgentConfig } from '../config/agent-config.js';
import type { PreflightCheck, Provisioner, ProvisionResult } from './provisioner-contract.js';
import { parallel, runTask, serial, task, type TaskContext } from '../tasks/tasks.js';
import { failpoint } from '../host/failpoints.js';
import type { HostPaths } from '../host/paths.js';
import { alternateMachine, type Clock, type CommandRunner } from '../host/types.js';
import type { TransferLimits } from '../outbound-http.js';
import type { UpstreamDaemonGuard } from '../host/upstream-daemon.js';
import { removeUpstreamLeftovers } from '../host/upstream-cleanup.js';
import type { Metrics } from '../metrics/metrics.js';
import { checkArtifacts, installArtifacts, type InstallArtifactsResult } from './artifacts/index.js';
import type { OpenWrite } from './artifacts/types.js';
import {
  nspawnFileList,
  setStandbyBoot,
  readHostInfo,
  removeNspawnFiles,
  stagedFileList,
  writeNspawnFiles,
  writeOsFiles,
  writeStagingFiles,
} from './files/index.js';
import { carryRegistryConfig } from './files/carry-registry-config.js';
import { pullImage, resolveImage, type PullImageResult } from './oci/index.js';
import { chooseImage, type ImageChoice } from './oci/resolve-image.js';
import { writeRootfsEntries } from './files/rootfs-entry.js';
import { discoverGpu, listGpuDevices, type GpuHost } from './gpu/discover.js';
import { removeGpuFiles, renderGpuFiles } from './gpu/gpu-files.js';

export type Arch = 'amd64' | 'arm64';

/** The OCI/Kubernetes name of this host's architecture. */
export function hostArch(nodeArch: string = process.arch): Arch {
  if (nodeArch === 'x64') return 'amd64';
  if (nodeArch === 'arm64') return 'arm64';
  throw new UnsupportedError(`unsupported architecture ${nodeArch}: agentd provisions amd64 and arm64 hosts`);
}

export interface ProvisionerOptions {
  paths: HostPaths;
  stateDir: string;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /** `systemctl daemon-reload` after nspawn files change. */
  daemonReload: () => Promise<void>;
  arch?: Arch;
  /** Free bytes the machines directory must have before provisioning (default 2 GiB). */
  minFreeBytes?: number;
  /** Test seam for artifact file writes (ENOSPC); default `fs.createWriteStream` with fsync. */
  openWrite?: OpenWrite;
  /** Credentials of private registries (src/provision/oci/registry-auth.ts), read at each pull. */
  registryAuthFile?: string | null;
  /** Deadline and rate floor of every download and registry call (docs/operations.md, "Limits"). */
  transferLimits?: TransferLimits;
  /** Runs host commands (`ldconfig -p` on a GPU host). */
  runner?: CommandRunner;
  /** Stops and disables the upstream agent's daemon before each provision (src/host/upstream-daemon.ts). */
  upstreamDaemon?: UpstreamDaemonGuard;
  /** The daemon's environment: `AGENT_OCI_IMAGE` and `AGENT_DISABLE_OCI_IMAGE` (default: none set). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** `statfs` of `dir`, or of its nearest existing ancestor: preflight must not create it. */
async function statfsNearest(dir: string): Promise<{ path: string; free: number }> {
  for (let p = path.resolve(dir); ; p = path.dirname(p)) {
    try {
      const s = await statfs(p);
      return { path: p, free: s.bavail * s.bsize };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || p === path.dirname(p)) throw err;
    }
  }
}

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

/**
 * A size for the disk check: tenths of a GiB from 1 GiB up, whole MiB below. Free space is
 * rounded down and the need up, so two figures that differ never print the same.
 */
function diskFigure(bytes: number, round: (x: number) => number): string {
  if (bytes >= GiB) return `${(round((bytes / GiB) * 10) / 10).toFixed(1)} GiB`;
  return `${round(bytes / MiB)} MiB`;
}

/** The disk check's words: `51 MiB free in /var/lib/machines (need 103 MiB)`. */
export function describeDiskSpace(free: number, need: number, where: string): string {
  return `${diskFigure(free, Math.floor)} free in ${where} (need ${diskFigure(need, Math.ceil)})`;
}

export function createProvisioner(o: ProvisionerOptions): Provisioner {
  const arch = o.arch ?? hostArch();
  const imageCache = path.join(o.stateDir, 'cache', 'blobs');
  const artifactCache = path.join(o.stateDir, 'cache', 'artifacts');
  const minFree = o.minFreeBytes ?? 2 * 1024 ** 3;
  const limits = o.transferLimits ? { limits: o.transferLimits } : {};
  const env = o.env ?? {};
  // What the last preflight or provision found, for dry-run plans (which list the GPU files).
  let lastGpu: GpuHost | null = null;

  /** The GPU check of a host with NVIDIA devices; none on a host without. */
  async function gpuCheck(devices: readonly string[]): Promise<PreflightCheck[]> {
    if (devices.length === 0) {
      lastGpu = null;
      return [];
    }
    try {
      const gpu = await discoverGpu(o.paths, devices, o.runner, arch);
      lastGpu = gpu;
      return [
        {
          name: 'gpu',
          ok: true,
          message: `${gpu.devices.length} GPU device nodes, ${gpu.libraries.length} driver libraries in ${gpu.libraryDirs.join(', ')}`,
        },
      ];
    } catch (err) {
      return [{ name: 'gpu', ok: false, message: describeError(err) }];
    }
  }

  async function imageCheck(
    config: AgentConfig,
    devices: readonly string[],
    signal?: AbortSignal,
  ): Promise<PreflightCheck> {
    let choice: ImageChoice;
    try {
      choice = chooseImage(config.OCIImage, env, devices.length > 0);
    } catch (err) {
      return { name: 'image', ok: false, message: describeError(err) };
    }
    const why = choice.source === 'config' ? '' : ` (${choice.source})`;
    return resolveImage(choice.ref, {
      arch,
      signal,
      clock: o.clock,
      retries: 1,
      registryAuthFile: o.registryAuthFile ?? null,
      ...limits,
    }).then(
      (r) => ({ name: 'image', ok: true, message: `${choice.ref}${why} resolves to ${r.digest}` }),
      (err: unknown) => ({ name: 'image', ok: false, message: describeError(err) }),
    );
  }

  async function diskCheck(): Promise<PreflightCheck> {
    try {
      const { path: where, free } = await statfsNearest(o.paths.machinesDir);
      return {
        name: 'disk-space',
        ok: free >= minFree,
        message: describeDiskSpace(free, minFree, where),
      };
    } catch (err) {
      return {
        name: 'disk-space',
        ok: false,
        message: `cannot check ${o.paths.machinesDir}: ${describeError(err)}`,
      };
    }
  }

  return {
    async preflight(config, signal) {
      const checks: PreflightCheck[] = [];
      let devices: string[] = [];
      let unreadable: PreflightCheck[] = [];
      try {
        devices = await listGpuDevices(o.paths);
      } catch (err) {
        unreadable = [{ name: 'gpu', ok: false, message: describeError(err) }];
      }
      const [artifacts, image, disk, gpu] = await Promise.all([
        checkArtifacts(config, arch, { signal, clock: o.clock, ...limits }).catch((err: unknown) => [
          { name: 'artifacts', ok: false, message: describeError(err) },
        ]),
        imageCheck(config, devices, signal),
        diskCheck(),
        gpuCheck(devices),
      ]);
      checks.push(...artifacts, image, disk, ...unreadable, ...gpu);
      return checks;
    },

    async provision(m, config, ctx: TaskContext): Promise<ProvisionResult> {
      const rootfs = o.paths.machineDir(m);
      // The upstream daemon would repave the node behind agentd's back: never beside an update.
      await o.upstreamDaemon?.takeOver(ctx.signal);
      // The machines directory is created here (0700, as systemd makes it), never by preflight.
      await mkdir(o.paths.machinesDir, { recursive: true, mode: 0o700 });
      // Host facts first: a host that cannot be read fails before anything is downloaded.
      const host = await readHostInfo(o.paths, { runner: o.runner, arch });
      const gpu = host.gpu ?? null;
      lastGpu = gpu;
      const choice = chooseImage(config.OCIImage, env, gpu !== null);
      if (choice.source !== 'config')
        ctx.logger.info({ image: choice.ref, source: choice.source }, 'chose the image');
      let image: PullImageResult | null = null;
      let artifacts: InstallArtifactsResult | null = null;
      // The image pull empties and fills the rootfs, so it goes first; then the artifacts
      // (usr/local/bin, opt/cni/bin) and the OS files (etc/) touch disjoint paths and run side
      // by side; the nspawn files and the daemon-reload come last.
      const plan = serial('provision', [
        task('pull image', async (t) => {
          image = await pullImage(choice.ref, rootfs, {
            arch,
            cacheDir: imageCache,
            signal: t.signal,
            logger: t.logger,
            clock: o.clock,
            progress: t.progress,
            registryAuthFile: o.registryAuthFile ?? null,
            ...limits,
          });
          o.metrics.downloadBytes.inc({ kind: 'image' }, image.downloadedBytes);
          failpoint('update.provision.mid');
        }),
        parallel('install', [
          task('install artifacts', async (t) => {
            artifacts = await installArtifacts(config, rootfs, {
              arch,
              cacheDir: artifactCache,
              signal: t.signal,
              logger: t.logger,
              clock: o.clock,
              progress: t.progress,
              ...(o.openWrite ? { openWrite: o.openWrite } : {}),
              ...limits,
            });
            o.metrics.downloadBytes.inc({ kind: 'artifact' }, artifacts.downloadedBytes);
            o.metrics.downloadCacheHits.inc({ kind: 'artifact' }, artifacts.cacheHits);
            o.metrics.downloadRetries.inc({ kind: 'artifact' }, artifacts.retries);
          }),
          task('write OS files', () => writeOsFiles(rootfs, host)),
          task(gpu ? 'write GPU files' : 'remove GPU files', () =>
            gpu ? writeRootfsEntries(rootfs, renderGpuFiles(gpu)) : removeGpuFiles(rootfs),
          ),
          task('carry registry configuration', async (t) => {
            const source = o.paths.machineDir(alternateMachine(m));
            const carried = await carryRegistryConfig(source, rootfs);
            if (carried.copied.length > 0) {
              t.logger.info({ from: source, files: carried.copied }, 'carried registry configuration');
            }
          }),
        ]),
        task('write nspawn files', () => writeNspawnFiles(o.paths, m, host)),
        task('daemon-reload', () => o.daemonReload()),
      ]);
      await runTask(plan, ctx);
      const pulled = image as PullImageResult | null;
      const installed = artifacts as InstallArtifactsResult | null;
      return {
        imageDigest: pulled?.manifestDigest ?? '',
        downloadedBytes: (pulled?.downloadedBytes ?? 0) + (installed?.downloadedBytes ?? 0),
        cacheHits: installed?.cacheHits ?? 0,
      };
    },

    async stage(m, config, ctx: TaskContext) {
      await runTask(
        task('write staging files', () => writeStagingFiles(o.paths.machineDir(m), config)),
        ctx,
      );
    },

    setStandbyBoot(m, on) {
      return setStandbyBoot(o.paths, m, on);
    },

    async removeMachineFiles(m) {
      await removeNspawnFiles(o.paths, m);
    },

    async removeUpstreamLeftovers(signal) {
      if (o.runner === undefined) throw new AgentError('INTERNAL', 'reset: no command runner for the host');
      return removeUpstreamLeftovers({ runner: o.runner, paths: o.paths, logger: o.logger, signal });
    },

    hostWarnings() {
      return o.upstreamDaemon?.warnings() ?? [];
    },

    plannedFiles(m, config: AgentConfig) {
      const rootfs = o.paths.machineDir(m);
      return [
        ...nspawnFileList(o.paths, m).map((f) => f.path),
        ...stagedFileList(config).map((f) => path.join(rootfs, f.path)),
        ...(lastGpu ? renderGpuFiles(lastGpu).map((f) => path.join(rootfs, f.path)) : []),
        o.paths.appliedConfig(m),
        o.paths.appliedConfigSidecar(m),
      ];
    },
  };
}
