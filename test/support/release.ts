/**
 * The release artifacts (`npm run release`: tarball, .deb, SHA256SUMS) for the tests that
 * install them — the release system test and the real-host suite — built once per set of inputs
 * and shared between test processes. The cache key is a digest of everything the release is
 * made of (`RELEASE_INPUTS`: the bundles in dist/, src/ they and the release's embedding code come
 * from, scripts/release/, the unit, deploy/, docs/ with the man pages, openapi/, examples/,
 * README, LICENSE, package.json), so a changed input never gets yesterday's artifacts (the
 * release system test checks that the list covers what the release reads and ships). Built from
 * the bundles `npm test` / `npm run test:host` built, without rebuilding them under running tests.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { release, type ReleaseResult } from '../../scripts/release/release.js';
import { buildOnce } from './build-lock.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
/** Every file and folder (repository-relative) the release artifacts are made from. */
export const RELEASE_INPUTS = [
  'dist/agentd.cjs',
  'dist/agentctl.cjs',
  'dist/agentctl-libs.cjs',
  'dist/agentctl-kube.cjs',
  'dist/sea-main.cjs',
  'dist/sink-worker.cjs',
  'dist/load-bundle.cjs',
  'dist/THIRD-PARTY-NOTICES',
  'scripts/release',
  // The notices of the bundled packages, with the runtime's added (scripts/notices.ts).
  'scripts/notices.ts',
  // RUNTIME_FLAGS and the code caches' making.
  'scripts/build.ts',
  // The sources of the bundles above, and the embedded files' format (src/embedded.ts).
  'src',
  'systemd',
  'deploy',
  'docs',
  'openapi',
  'examples',
  'README.md',
  'LICENSE',
  'package.json',
];

/** Each file under `p` with its mode (the executable bit of a shipped script is part of it). */
async function* files(p: string): AsyncGenerator<[string, number]> {
  const s = await stat(p);
  if (s.isDirectory()) {
    for (const e of (await readdir(p)).sort()) yield* files(path.join(p, e));
  } else yield [p, s.mode & 0o7777];
}

async function inputsDigest(): Promise<string> {
  const hash = createHash('sha256');
  for (const input of RELEASE_INPUTS) {
    for await (const [f, mode] of files(path.join(REPO, input))) {
      hash
        .update(`${path.relative(REPO, f)}\0${mode.toString(8)}\0`)
        .update(await readFile(f))
        .update('\0');
    }
  }
  return hash.digest('hex').slice(0, 16);
}

const resultOf = (dir: string, version: string): ReleaseResult & { outDir: string } => ({
  version,
  outDir: dir,
  tarball: path.join(dir, `agentd-${version}-linux-x64.tar.gz`),
  deb: path.join(dir, `agentd_${version}_amd64.deb`),
  sums: path.join(dir, 'SHA256SUMS'),
  executableBytes: 0,
  runtime: { version: '', cached: true, stripped: false },
});

let pending: Promise<ReleaseResult> | undefined;

/** The release artifacts of this checkout (built when missing; about a minute). */
export function ensureRelease(): Promise<ReleaseResult> {
  return (pending ??= (async () => {
    const { version } = JSON.parse(await readFile(path.join(REPO, 'package.json'), 'utf8')) as {
      version: string;
    };
    const base = path.join(os.tmpdir(), 'agentd-test-release');
    const dir = path.join(base, await inputsDigest());
    await mkdir(base, { recursive: true });
    const built = (): boolean => existsSync(path.join(dir, 'SHA256SUMS'));
    // One builder across the test processes; the others wait and use its artifacts.
    await buildOnce(dir, built, async () => {
      const tmp = `${dir}.tmp-${process.pid}`;
      await rm(tmp, { recursive: true, force: true });
      await release({ outDir: tmp, skipBundle: true });
      await rename(tmp, dir);
    });
    return resultOf(dir, version);
  })().catch((err: unknown) => {
    pending = undefined;
    throw err;
  }));
}
