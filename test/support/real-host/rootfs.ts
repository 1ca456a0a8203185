/**
 * The Debian bookworm rootfs the real hosts boot and their machines' image is made of, built
 * with mmdebstrap and cached as a `tar.zst` outside the repository (`$AGENTD_REAL_HOST_CACHE`,
 * default `~/.cache/agentd/real-host`). The cache file's name carries a digest of the build
 * recipe, so a changed recipe builds afresh; a missing file is built (about a minute).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { buildOnce } from '../build-lock.js';
import { runOk } from './run.js';

/**
 * The host needs systemd, machined (systemd-container), D-Bus and iproute2, and libatomic1, a
 * documented prerequisite of agentd's executable (docs/operations.md); the machines the same.
 */
const PACKAGES = ['systemd', 'systemd-sysv', 'systemd-container', 'dbus', 'iproute2', 'libatomic1'];
const RECIPE = [
  '--variant=minbase',
  `--include=${PACKAGES.join(',')}`,
  '--dpkgopt=path-exclude=/usr/share/man/*',
  '--dpkgopt=path-exclude=/usr/share/doc/*',
  '--dpkgopt=path-exclude=/usr/share/locale/*',
  'bookworm',
];

export function realHostCacheDir(): string {
  return process.env.AGENTD_REAL_HOST_CACHE ?? path.join(os.homedir(), '.cache', 'agentd', 'real-host');
}

/** A digest of the recipe, for cache file names derived from the base. */
export const RECIPE_ID = createHash('sha256').update(RECIPE.join('\n')).digest('hex').slice(0, 12);

let building: Promise<string> | undefined;

/** The path of the cached base tarball, building it first when it is missing. */
export function ensureBaseTarball(): Promise<string> {
  return (building ??= (async () => {
    const dir = realHostCacheDir();
    const file = path.join(dir, `bookworm-base-${RECIPE_ID}.tar.zst`);
    await mkdir(dir, { recursive: true });
    // One mmdebstrap across the test processes; built under a name of its own and renamed, so
    // no reader ever sees half a file.
    await buildOnce(
      file,
      () => existsSync(file),
      async () => {
        const tmp = `${file}.${process.pid}.tmp.tar.zst`;
        try {
          await runOk('mmdebstrap', [...RECIPE, tmp], { timeoutMs: 600_000 });
          await rename(tmp, file);
        } finally {
          await rm(tmp, { force: true });
        }
      },
    );
    return file;
  })().catch((err: unknown) => {
    building = undefined;
    throw err;
  }));
}
