/**
 * What a GPU host gives its machines (docs/operations.md, "GPU hosts"): the NVIDIA device
 * nodes, and the driver's libraries found through `ldconfig -p`, each library directory bound
 * read-only at `/run/host-nvidia/<i>`. Read under `--root` and through the CommandRunner, so
 * the simulated host and tests present a GPU host of files and a recorded cache.
 */
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { AgentError, PreconditionFailedError, describeError, errorCode, toAgentError } from '../../errors.js';
import type { HostPaths } from '../../host/paths.js';
import type { CommandRunner } from '../../host/types.js';
import type { OciArch } from '../oci/types.js';
import { resolvePathInRootfs } from '../files/rootfs-path.js';
import { REQUIRED_NVIDIA_LIBRARIES, parseLdconfigCache } from './ldconfig-cache.js';

/** Where the machine sees the host's library directories: `/run/host-nvidia/<i>`. */
export const HOST_NVIDIA_DIR = '/run/host-nvidia';

/** The machine's multiarch library directory, where each library gets its link. */
export const MACHINE_LIB_DIRS: Record<OciArch, string> = Object.freeze({
  amd64: '/usr/lib/x86_64-linux-gnu',
  arm64: '/usr/lib/aarch64-linux-gnu',
});

/** One driver library the machine gets. */
export interface GpuLibrary {
  readonly name: string;
  /** Its path on the host. */
  readonly hostPath: string;
  /** Index into `GpuHost.libraryDirs`: the library is `/run/host-nvidia/<dirIndex>/<name>` inside. */
  readonly dirIndex: number;
}

/** A host with NVIDIA GPUs, as its machines use it. */
export interface GpuHost {
  /** Device nodes to bind and allow: `/dev/nvidia*`, `/dev/nvidia-caps/*`, `/dev/dri/*`, sorted. */
  readonly devices: readonly string[];
  /** Host library directories, in first-use order; directory `i` is bound at `/run/host-nvidia/<i>`. */
  readonly libraryDirs: readonly string[];
  readonly libraries: readonly GpuLibrary[];
  /** The machine's multiarch directory (`/usr/lib/x86_64-linux-gnu`). */
  readonly machineLibDir: string;
}

/** NVIDIA device nodes directly in /dev (`nvidia0`, `nvidiactl`, `nvidia-uvm`, …). */
const NVIDIA_DEVICE_RE = /^nvidia[A-Za-z0-9_-]*$/;
/** Names nspawn can take in a `Bind=` line. */
const SAFE_NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

/** The non-directory entries of a host directory under the root, sorted; none when it is absent. */
async function listNodes(paths: HostPaths, dir: string, accept: RegExp): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(paths.resolve(dir));
  } catch (err) {
    if (errorCode(err) === 'ENOENT' || errorCode(err) === 'ENOTDIR') return [];
    throw toAgentError(err, `list host devices in ${paths.resolve(dir)}`);
  }
  const nodes: string[] = [];
  for (const name of names.sort()) {
    if (!accept.test(name)) continue;
    const st = await stat(paths.resolve(`${dir}/${name}`)).catch(() => undefined);
    if (st !== undefined && !st.isDirectory()) nodes.push(`${dir}/${name}`);
  }
  return nodes;
}

/**
 * The host's GPU device nodes: none on a host without `/dev/nvidia*` (a host with only an
 * integrated GPU in `/dev/dri` is no GPU host).
 */
export async function listGpuDevices(paths: HostPaths): Promise<string[]> {
  const nvidia = await listNodes(paths, '/dev', NVIDIA_DEVICE_RE);
  if (nvidia.length === 0) return [];
  const caps = await listNodes(paths, '/dev/nvidia-caps', SAFE_NAME_RE);
  const dri = await listNodes(paths, '/dev/dri', SAFE_NAME_RE);
  return [...nvidia, ...caps, ...dri].sort();
}

async function existsUnderRoot(paths: HostPaths, hostPath: string): Promise<boolean> {
  try {
    await stat(await resolvePathInRootfs(paths.root, hostPath.slice(1)));
    return true;
  } catch {
    return false;
  }
}

/**
 * The driver's libraries of a GPU host, from `ldconfig -p`. Fails with PRECONDITION_FAILED,
 * naming what is missing, when the cache lacks a required library or names a file that does
 * not exist: such a machine would start with GPUs it cannot use.
 */
export async function discoverGpu(
  paths: HostPaths,
  devices: readonly string[],
  runner: CommandRunner | undefined,
  arch: OciArch,
): Promise<GpuHost> {
  const what = `GPU host (${devices.filter((d) => d.startsWith('/dev/nvidia')).join(', ')})`;
  if (runner === undefined) {
    throw new AgentError('INTERNAL', `${what}: no command runner to read the linker cache with`);
  }
  let output: string;
  try {
    output = (await runner.run('ldconfig', ['-p'])).stdout;
  } catch (err) {
    throw new PreconditionFailedError(
      `${what}: cannot list the driver's libraries with ldconfig -p: ${describeError(err)}`,
      { cause: err },
    );
  }
  const cached = parseLdconfigCache(output, arch);
  const missing = REQUIRED_NVIDIA_LIBRARIES.filter((name) => !cached.some((l) => l.name === name));
  const absent: string[] = [];
  for (const lib of cached) if (!(await existsUnderRoot(paths, lib.path))) absent.push(lib.path);
  if (missing.length > 0 || absent.length > 0) {
    const parts = [
      ...(missing.length > 0
        ? [`ldconfig -p lists no ${missing.join(', ')} for ${arch} (is the NVIDIA driver installed?)`]
        : []),
      ...(absent.length > 0 ? [`the linker cache names files that do not exist: ${absent.join(', ')}`] : []),
    ];
    throw new PreconditionFailedError(`${what}: ${parts.join('; ')}`, { data: { missing, absent } });
  }
  const libraryDirs: string[] = [];
  const libraries = cached.map((lib) => {
    const dir = path.posix.dirname(lib.path);
    if (!libraryDirs.includes(dir)) libraryDirs.push(dir);
    return Object.freeze({ name: lib.name, hostPath: lib.path, dirIndex: libraryDirs.indexOf(dir) });
  });
  return Object.freeze({
    devices: Object.freeze([...devices]),
    libraryDirs: Object.freeze(libraryDirs),
    libraries: Object.freeze(libraries),
    machineLibDir: MACHINE_LIB_DIRS[arch],
  });
}
