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
  return {
    agentd: path.join(unpacked, 'agentd'),
    agentctl: path.join(unpacked, 'agentctl'),
    node,
    nodeVersion: NODE_RUNTIME.version,
  };
}
