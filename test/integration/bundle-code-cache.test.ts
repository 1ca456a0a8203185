/**
 * The bundles' V8 code caches (src/bin/load-bundle.ts, docs/benchmarks.md "CLI startup"): the
 * cache `npm run build` writes next to each bundle is accepted by the loader the npm bins use,
 * and a cache V8 rejects (or none) only means compiling without one: the program still runs.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CODE_CACHE_ORIGIN, type CodeCacheOrigin } from '../../scripts/build.js';
import { REPO_ROOT, makeTempDir } from '../support/daemon.js';

const LOADER = path.join(REPO_ROOT, 'dist/load-bundle.cjs');

/** Run `code` in a plain `node` with the loader as `L`; returns its stdout (fails on exit ≠ 0). */
function node(code: string): string {
  const r = spawnSync(process.execPath, ['-e', `const L = require(${JSON.stringify(LOADER)}); ${code}`], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
  });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

/** Whether V8 rejects `cache` for `bundle`, compiled the way the loader compiles it. */
const rejected = (bundle: string, cache: string): string =>
  node(
    `const fs = require('fs'); const f = ${JSON.stringify(bundle)};` +
      `process.stdout.write(String(L.compileBundle(f, fs.readFileSync(f, 'utf8'), fs.readFileSync(${JSON.stringify(cache)})).cachedDataRejected));`,
  );

describe('bundle code caches', () => {
  // A cache serves only the runtime that made it. On that runtime the build's caches must be
  // accepted; on another (CI's second runtime runs these tests on the release's Node LTS against
  // dist/ built by the first) V8 must reject them and the program must still run.
  const origin = JSON.parse(
    readFileSync(path.join(REPO_ROOT, 'dist', CODE_CACHE_ORIGIN), 'utf8'),
  ) as CodeCacheOrigin;
  const sameRuntime = origin.v8 === process.versions.v8 && origin.flags.length === 0;

  it.each(['agentd', 'agentctl'])(
    'the build wrote a cache for %s that the loader takes when it can',
    (program) => {
      const bundle = path.join(REPO_ROOT, 'dist', `${program}.cjs`);
      expect(existsSync(`${bundle}.cache`)).toBe(true);
      expect(
        rejected(bundle, `${bundle}.cache`),
        `dist/${program}.cjs.cache was made by node ${origin.node} (V8 ${origin.v8}); this is ${process.version} (V8 ${process.versions.v8})`,
      ).toBe(sameRuntime ? 'false' : 'true');
      const r = spawnSync(
        process.execPath,
        [path.join(REPO_ROOT, 'dist', 'bin', `${program}.js`), '--version'],
        {
          encoding: 'utf8',
        },
      );
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    },
  );

  it('a cache made by running the program is accepted and the program runs with it', async () => {
    const bundle = path.join(await makeTempDir('agentd-code-cache-'), 'prog.cjs');
    await writeFile(bundle, 'exports.run = () => process.stdout.write(process.argv.slice(2).join(","));\n');
    expect(
      node(`L.writeCodeCache(${JSON.stringify(bundle)}, ['a', 'b'], ${JSON.stringify(`${bundle}.cache`)});`),
    ).toBe('a,b');
    expect(rejected(bundle, `${bundle}.cache`)).toBe('false');
    expect(node(`process.argv.push('prog', 'x'); L.loadBundleFile(${JSON.stringify(bundle)}).run();`)).toBe(
      'x',
    );
  });

  it('a cache V8 rejects, or none, still runs the program', async () => {
    const bundle = path.join(await makeTempDir('agentd-code-cache-'), 'other.cjs');
    await writeFile(bundle, 'exports.run = () => process.stdout.write("ran");\n');
    expect(node(`L.loadBundleFile(${JSON.stringify(bundle)}).run();`)).toBe('ran');
    await writeFile(`${bundle}.cache`, 'not a code cache');
    expect(rejected(bundle, `${bundle}.cache`)).toBe('true');
    expect(node(`L.loadBundleFile(${JSON.stringify(bundle)}).run();`)).toBe('ran');
  });
});
