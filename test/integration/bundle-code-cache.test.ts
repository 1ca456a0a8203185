/**
 * The bundles' V8 code caches (src/bin/load-bundle.ts, docs/benchmarks.md "CLI startup"): the
 * cache `npm run build` writes next to each bundle is accepted by the loader the npm bins use,
 * and a cache V8 rejects (or none) only means compiling without one: the program still runs.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
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
  it.each(['agentd', 'agentctl'])('the build wrote a cache for %s that the loader accepts', (program) => {
    const bundle = path.join(REPO_ROOT, 'dist', `${program}.cjs`);
    expect(existsSync(`${bundle}.cache`)).toBe(true);
    expect(rejected(bundle, `${bundle}.cache`)).toBe('false');
  });

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
    await writeFile(`${bundle}.cache`, 'not a code cache');
    expect(rejected(bundle, `${bundle}.cache`)).toBe('true');
    expect(node(`L.loadBundleFile(${JSON.stringify(bundle)}).run();`)).toBe('ran');
  });
});
