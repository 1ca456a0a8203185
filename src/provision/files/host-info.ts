/**
 * What a machine copies from its host: hostname, DNS resolver configuration, the device
 * nodes (KVM, NVIDIA) to bind into it and the GPU driver's libraries. Read under `--root`, so tests and `--sim` use their
 * own files.
 */
import { readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import { PreconditionFailedError, toAgentError } from '../../errors.js';
import type { HostPaths } from '../../host/paths.js';
import type { CommandRunner } from '../../host/types.js';
import { discoverGpu, listGpuDevices, type GpuHost } from '../gpu/discover.js';
import type { OciArch } from '../oci/types.js';
import { resolvePathInRootfs } from './rootfs-path.js';

/** The host facts the OS and nspawn files are made from. */
export interface HostInfo {
  /** The host's running name (the Node's); the machine shares the host network namespace and name. */
  readonly hostname: string;
  /** Contents for the machine's `/etc/resolv.conf` (the real upstream servers, not the resolved stub). */
  readonly resolvConf: string;
  /** Absolute host device paths to bind into the machine, sorted (`/dev/kvm`, `/dev/nvidia0`, …). */
  readonly devices: readonly string[];
  /** The host's NVIDIA GPUs and driver libraries; null (or absent) on a host without one. */
  readonly gpu?: GpuHost | null;
}

/** How `readHostInfo` reads what only a command knows. */
export interface ReadHostInfoOptions {
  /** Runs `ldconfig -p` on a GPU host. */
  runner?: CommandRunner;
  /** The host's architecture (default amd64): which libraries and multiarch directory. */
  arch?: OciArch;
}

/** systemd-resolved's stub listener: useless inside a machine whose resolved is masked. */
const RESOLVED_STUB_RE = /^\s*nameserver\s+127\.0\.0\.53\s*$/m;

/** Read a host file under the root, or undefined when it does not exist. */
async function readHostFile(paths: HostPaths, hostPath: string): Promise<string | undefined> {
  try {
    const file = await resolvePathInRootfs(paths.root, hostPath.slice(1));
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw toAgentError(err, `read host ${paths.resolve(hostPath)}`);
  }
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

/** hostname(5): the first line that is neither empty nor a comment. */
function firstNameLine(text: string | undefined): string | undefined {
  return text
    ?.split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '' && !l.startsWith('#'));
}

/**
 * The machine's hostname is the host's running one, as upstream wrote it: kubelet registered
 * the Node under it, so a new machine keeps the Node's name even when `/etc/hostname` says
 * otherwise (renamed by hand, or set by DHCP or cloud-init). Read from the kernel under
 * `--root`; a root without `/proc` (a test, the simulated host) falls back to its
 * `/etc/hostname`, then to this process's hostname.
 */
async function readHostname(paths: HostPaths): Promise<string> {
  const running = firstNameLine(await readHostFile(paths, '/proc/sys/kernel/hostname'));
  const source = running !== undefined ? '/proc/sys/kernel/hostname' : '/etc/hostname';
  const hostname = running ?? firstNameLine(await readHostFile(paths, '/etc/hostname')) ?? os.hostname();
  if (!/^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$/.test(hostname)) {
    throw new PreconditionFailedError(
      `host ${paths.resolve(source)}: expected a hostname of letters, digits, "-" and ".", got ${JSON.stringify(hostname)}`,
    );
  }
  return hostname;
}

/**
 * The host's `/etc/resolv.conf`, links followed, as upstream copies it, with one deliberate
 * difference: when it points at systemd-resolved's stub (127.0.0.53), the servers resolved
 * itself uses (`/run/systemd/resolve/resolv.conf`) are copied instead, so pods' DNS does not
 * depend on the host's stub (docs/compatibility.md, "The machine's insides").
 */
async function readResolvConf(paths: HostPaths): Promise<string> {
  const etc = await readHostFile(paths, '/etc/resolv.conf');
  if (etc === undefined) {
    throw new PreconditionFailedError(
      `host ${paths.resolve('/etc/resolv.conf')}: missing; the machine needs the host's DNS configuration`,
    );
  }
  if (!RESOLVED_STUB_RE.test(etc)) return etc;
  // The stub still answers from the machine (same network namespace), so it is kept when
  // resolved does not publish the upstream servers.
  return (await readHostFile(paths, '/run/systemd/resolve/resolv.conf')) ?? etc;
}

/** Read the host facts a machine needs: hostname, resolv.conf, devices to bind and GPUs. */
export async function readHostInfo(paths: HostPaths, options: ReadHostInfoOptions = {}): Promise<HostInfo> {
  const [hostname, resolvConf, kvm, gpuDevices] = await Promise.all([
    readHostname(paths),
    readResolvConf(paths),
    exists(paths.resolve('/dev/kvm')),
    listGpuDevices(paths),
  ]);
  const gpu =
    gpuDevices.length === 0
      ? null
      : await discoverGpu(paths, gpuDevices, options.runner, options.arch ?? 'amd64');
  const devices = [...(kvm ? ['/dev/kvm'] : []), ...gpuDevices];
  return Object.freeze({ hostname, resolvConf, devices: Object.freeze(devices), gpu });
}
