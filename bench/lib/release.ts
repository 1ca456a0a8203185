/**
 * The release executable for the benches: unpacked from release/agentd-<version>-linux-x64.tar.gz
 * (made by `npm run release`), with the Node runtime it embeds (from the release cache) as the
 * baseline's runtime.
 */
import { execFileSync } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { cacheDir, NODE_RUNTIME } from '../../scripts/release/node-runtime.js';
import { REPO_ROOT } from './processes.js';

export interface ReleaseExecutable {
  /** `agentd` in the unpacked tarball; `agentctl` is beside it (a symlink). */
  agentd: string;
  agentctl: string;
  /** The plain `node` of the same runtime. */
  node: string;
  nodeVersion: string;
}

/**
 * Drop `files` from the page cache (GNU dd: `iflag=nocache count=0` asks the kernel to drop the
 * whole file), so that the executables measured are read from disk as on a host after a boot,
 * the release and its baseline runtime alike. How a file sits in the page cache changes how fast
 * a program mapped from it starts: the same release executable read 1.31 × `node -e 0` straight
 * after tar wrote it (1.40–1.50 at another hour), 1.19 straight after `cp` wrote it, and
 * 1.25–1.28 read back from disk (docs/benchmarks.md, "CLI startup", and that file's history). A bench that
 * measured the file as tar left it measured the unpacking, not the program.
 */
export function evictFromPageCache(files: readonly string[]): void {
  for (const file of files) execFileSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
}

/** Unpack the release into `dir`; null when there is no release tarball or no cached runtime. */
export async function unpackRelease(dir: string): Promise<ReleaseExecutable | null> {
  const { version } = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
    version: string;
  };
  const tarball = path.join(REPO_ROOT, 'release', `agentd-${version}-linux-x64.tar.gz`);
  const node = path.join(cacheDir(), `${NODE_RUNTIME.package}-${NODE_RUNTIME.version}`, 'bin', 'node');
  try {
    await access(tarball);
    await access(node);
  } catch {
    return null;
  }
  execFileSync('tar', ['-xzf', tarball, '-C', dir]);
  const unpacked = path.join(dir, `agentd-${version}-linux-x64`);
  evictFromPageCache([path.join(unpacked, 'agentd'), node]);
  return {
    agentd: path.join(unpacked, 'agentd'),
    agentctl: path.join(unpacked, 'agentctl'),
    node,
    nodeVersion: NODE_RUNTIME.version,
  };
}
