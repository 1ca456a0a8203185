/**
 * The host-side files of a machine: its `.nspawn` settings and the drop-in for its
 * `systemd-nspawn@<m>.service`. The caller runs `systemctl daemon-reload` afterwards.
 */
import { rm, rmdir } from 'node:fs/promises';
import { InvalidConfigError, toAgentError } from '../../errors.js';
import { writeFileAtomic } from '../../host/fs-atomic.js';
import type { HostPaths } from '../../host/paths.js';
import type { MachineName } from '../../host/types.js';
import { HOST_NVIDIA_DIR, type GpuHost } from '../gpu/discover.js';
import type { HostInfo } from './host-info.js';

/** Device paths nspawn can bind: absolute, under /dev, nothing it would split or unquote. */
const DEVICE_PATH_RE = /^\/dev\/[A-Za-z0-9_][A-Za-z0-9_./-]*$/;

function validateDevices(devices: readonly string[]): readonly string[] {
  for (const dev of devices) {
    if (!DEVICE_PATH_RE.test(dev) || dev.split('/').includes('..')) {
      throw new InvalidConfigError(
        `host device: expected a path under /dev such as /dev/kvm, got ${JSON.stringify(dev)}`,
      );
    }
  }
  return devices;
}

/**
 * `/etc/systemd/nspawn/<m>.nspawn`: full capabilities and the host network namespace (so two
 * machines can never run kubelet at once), host kernel modules read-only, host devices bound.
 */
export function renderNspawnSettings(
  m: MachineName,
  devices: readonly string[],
  gpu: GpuHost | null = null,
): string {
  const binds = validateDevices(devices).map((dev) => `Bind=${dev}\n`);
  // Each driver library directory, read-only, where the in-machine setup links from.
  const libBinds = (gpu?.libraryDirs ?? []).map(
    (dir, i) => `BindReadOnly=${validateLibraryDir(dir)}:${HOST_NVIDIA_DIR}/${i}\n`,
  );
  return (
    `# Written by agentd for machine ${m}; rewritten on every update.\n` +
    '[Exec]\n' +
    'Capability=all\n' +
    'PrivateUsers=no\n' +
    'SystemCallFilter=@keyring bpf\n' +
    '\n' +
    '[Network]\n' +
    'VirtualEthernet=no\n' +
    '\n' +
    '[Files]\n' +
    'BindReadOnly=/lib/modules\n' +
    binds.join('') +
    libBinds.join('')
  );
}

/**
 * `DeviceAllow=` for a bound device, as upstream (`rwm`): systemd-nspawn@.service runs with
 * `DevicePolicy=closed`, so a bound device node is visible but cannot be opened without it.
 */
function deviceAllow(dev: string): string {
  return `DeviceAllow=${dev} rwm\n`;
}

/** A host library directory nspawn can bind: absolute, nothing it would split at (`:`) or misread. */
function validateLibraryDir(dir: string): string {
  if (!/^\/[A-Za-z0-9_./+-]+$/.test(dir) || dir.split('/').includes('..')) {
    throw new InvalidConfigError(
      `GPU driver library directory: expected an absolute path such as /usr/lib/x86_64-linux-gnu, got ${JSON.stringify(dir)}`,
    );
  }
  return dir;
}

/**
 * `systemd-nspawn@<m>.service.d/override.conf`. `StartLimitIntervalSec` belongs in `[Unit]`
 * (upstream put it in `[Service]`, where systemd ignores it, so a crash-looping machine hit
 * the start limit and stayed down).
 */
export function renderNspawnDropIn(m: MachineName, devices: readonly string[]): string {
  return (
    `# Written by agentd for machine ${m}; rewritten on every update.\n` +
    '[Unit]\n' +
    'StartLimitIntervalSec=0\n' +
    '\n' +
    '[Service]\n' +
    'Restart=on-failure\n' +
    'RestartSec=10s\n' +
    // A machine left registered by a crash makes the start fail with "already exists".
    `ExecStartPre=-/usr/bin/machinectl terminate ${m}\n` +
    'Environment=SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1\n' +
    'Environment=SYSTEMD_NSPAWN_API_VFS_WRITABLE=network\n' +
    validateDevices(devices).map(deviceAllow).join('')
  );
}

/** A host file `writeNspawnFiles` writes, for dry-run plans. */
export interface HostFilePlan {
  /** Absolute path on the host (under `--root`). */
  readonly path: string;
  readonly mode: number;
}

/** The host files of machine `m`, in writing order. */
export function nspawnFileList(paths: HostPaths, m: MachineName): HostFilePlan[] {
  return [
    { path: paths.nspawnFile(m), mode: 0o644 },
    { path: paths.nspawnDropIn(m), mode: 0o644 },
  ];
}

/** Write the `.nspawn` file and the service drop-in of machine `m` (mode 0644). */
export async function writeNspawnFiles(paths: HostPaths, m: MachineName, host: HostInfo): Promise<void> {
  const settings = renderNspawnSettings(m, host.devices, host.gpu ?? null);
  const dropIn = renderNspawnDropIn(m, host.devices);
  for (const [file, content] of [
    [paths.nspawnFile(m), settings],
    [paths.nspawnDropIn(m), dropIn],
  ] as const) {
    try {
      await writeFileAtomic(file, content, { mode: 0o644 });
    } catch (err) {
      throw toAgentError(err, `write nspawn file ${file} for ${m}`);
    }
  }
}

/** Remove machine `m`'s `.nspawn` file and drop-in (and its directory when left empty); absent is fine. */
export async function removeNspawnFiles(paths: HostPaths, m: MachineName): Promise<void> {
  try {
    await rm(paths.nspawnFile(m), { force: true });
    await rm(paths.nspawnDropIn(m), { force: true });
    await rmdir(paths.nspawnDropInDir(m));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Someone else's drop-in in the same directory stays, and so does the directory.
    if (code === 'ENOENT' || code === 'ENOTEMPTY' || code === 'EEXIST') return;
    throw toAgentError(err, `remove nspawn files of ${m}`);
  }
}
