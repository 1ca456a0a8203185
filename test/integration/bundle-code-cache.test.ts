/**
 * The bundles' V8 code caches (src/bin/load-bundle.ts, docs/benchmarks.md "CLI startup"): the
 * cache `npm run build` writes next to each bundle is accepted by the loader the npm bins use,
 * and a cache V8 rejects (or none) only means compiling without one: the program still runs.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RUNTIME_FLAGS } from '../../scripts/build.js';
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
  /** The cache file the loader reads for `bundle` in a `node` run with `flags`. */
  const cacheFileFor = (bundle: string, flags: string[]): string => {
    const r = spawnSync(
      process.execPath,
      [
        ...flags,
        '-e',
        `process.stdout.write(require(${JSON.stringify(LOADER)}).codeCacheName(${JSON.stringify(bundle)}))`,
      ],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stderr).toBe(0);
    return r.stdout;
  };

  // CI's second runtime runs these tests against dist/ built by the first (scripts/test.ts sets
  // AGENTD_TEST_FOREIGN_DIST): there the build's caches belong to another V8 and must be refused.
  const foreignDist = process.env.AGENTD_TEST_FOREIGN_DIST === '1';

  it.each(['agentd', 'agentctl'])(
    'the build wrote caches for %s that the loader accepts, plain and under the release flags',
    (program) => {
      const bundle = path.join(REPO_ROOT, 'dist', `${program}.cjs`);
      const plain = cacheFileFor(bundle, []);
      // The same key when the release has no flags, or V8 leaves them out of its flag hash: then
      // one cache serves both.
      const release = cacheFileFor(bundle, [...RUNTIME_FLAGS]);
      // A flag V8 hashes, another key: a cache made under one set is rejected under the other.
      expect(cacheFileFor(bundle, ['--bytecode-old-age=1'])).not.toBe(plain);
      if (foreignDist) {
        const made = readdirSync(path.dirname(bundle))
          .filter((f) => f.startsWith(`${program}.cjs.`) && f.endsWith('.cache'))
          .map((f) => path.join(path.dirname(bundle), f));
        expect(made.length).toBeGreaterThanOrEqual(1);
        expect(made).not.toContain(plain);
        for (const cache of made) expect(rejected(bundle, cache), cache).toBe('true');
        const r = spawnSync(
          process.execPath,
          [path.join(REPO_ROOT, 'dist', 'bin', `${program}.js`), '--version'],
          {
            encoding: 'utf8',
          },
        );
        expect(r.status, r.stderr).toBe(0);
        return;
      }
      expect(existsSync(plain)).toBe(true);
      expect(existsSync(release)).toBe(true);
      expect(rejected(bundle, plain)).toBe('false');
      if (release !== plain) expect(rejected(bundle, release)).toBe('true');
    },
  );

  it('a cache made by running the program is accepted and the program runs with it', async () => {
    const bundle = path.join(await makeTempDir('agentd-code-cache-'), 'prog.cjs');
    await writeFile(bundle, 'exports.run = () => process.stdout.write(process.argv.slice(2).join(","));\n');
    expect(
      node(
        `L.writeCodeCache(${JSON.stringify(bundle)}, ['a', 'b'], ${JSON.stringify(path.dirname(bundle))});`,
      ),
    ).toBe('a,b');
    expect(rejected(bundle, cacheFileFor(bundle, []))).toBe('false');
    expect(node(`process.argv.push('prog', 'x'); L.loadBundleFile(${JSON.stringify(bundle)}).run();`)).toBe(
      'x',
    );
  });

  it("a bundle's sibling bundle (`./<name>.cjs`) is loaded from its directory, once, on first require", async () => {
    const dir = await makeTempDir('agentd-code-cache-');
    const bundle = path.join(dir, 'prog.cjs');
    await writeFile(
      path.join(dir, 'prog-libs.cjs'),
      'globalThis.loads = (globalThis.loads ?? 0) + 1; module.exports = { lib: require("node:path").sep };\n',
    );
    await writeFile(
      bundle,
      [
        'exports.run = () => {',
        '  const before = globalThis.loads ?? 0;',
        '  const a = require("./prog-libs.cjs"), b = require("./prog-libs.cjs");',
        '  process.stdout.write([before, globalThis.loads, a === b, a.lib].join(","));',
        '};',
      ].join('\n'),
    );
    expect(node(`L.loadBundleFile(${JSON.stringify(bundle)}).run();`)).toBe('0,1,true,/');
  });

  it('a cache V8 rejects, or none, still runs the program', async () => {
    const bundle = path.join(await makeTempDir('agentd-code-cache-'), 'other.cjs');
    await writeFile(bundle, 'exports.run = () => process.stdout.write("ran");\n');
    expect(node(`L.loadBundleFile(${JSON.stringify(bundle)}).run();`)).toBe('ran');
    await writeFile(cacheFileFor(bundle, []), 'not a code cache');
    expect(rejected(bundle, cacheFileFor(bundle, []))).toBe('true');
    expect(node(`L.loadBundleFile(${JSON.stringify(bundle)}).run();`)).toBe('ran');
  });
});
