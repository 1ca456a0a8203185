/**
 * What the daemon's bundle leaves out, read from its source map (the list of every file that
 * went into dist/agentd.cjs). Each package of LEFT_OUT_PACKAGES (scripts/build.ts) is replaced by
 * a module that throws why, and none of its own files is bundled; zod brings its English
 * messages only, not its other locales (src/ imports it as a namespace, which eslint enforces).
 * Every byte of the bundle is held in the daemon's memory as source (docs/benchmarks.md,
 * "Footprint"); that the daemon built this way serves is what every other integration test shows.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LEFT_OUT_PACKAGES } from '../../scripts/build.js';
import { REPO_ROOT } from '../support/daemon.js';

async function bundledFiles(bundle: string): Promise<string[]> {
  const map = JSON.parse(await readFile(path.join(REPO_ROOT, 'dist', `${bundle}.map`), 'utf8')) as {
    sources: string[];
  };
  return map.sources;
}

describe('the daemon bundle', () => {
  it('replaces each left-out package by a module that says why, and carries none of its files', async () => {
    const files = await bundledFiles('agentd.cjs');
    const source = await readFile(path.join(REPO_ROOT, 'dist/agentd.cjs'), 'utf8');
    expect(Object.keys(LEFT_OUT_PACKAGES)).toContain('@fastify/ajv-compiler');
    for (const [pkg, why] of Object.entries(LEFT_OUT_PACKAGES)) {
      expect(files).toContain(`agentd-left-out:${pkg}`);
      expect(files.filter((f) => f.includes(`node_modules/${pkg}/`))).toEqual([]);
      expect(source).toContain(`${pkg} is left out of agentd's bundles (scripts/build.ts): ${why}`);
    }
    // What the left-out compilers would have brought with them.
    expect(files.filter((f) => /node_modules\/(ajv|ajv-formats|fast-uri)\//.test(f))).toEqual([]);
  });

  it('carries zod’s English messages and no other locale', async () => {
    const locales = (await bundledFiles('agentd.cjs'))
      .filter((f) => f.includes('node_modules/zod/v4/locales/'))
      .map((f) => path.basename(f));
    expect(locales).toContain('en.js');
    expect(locales.filter((f) => f !== 'en.js' && f !== 'index.js')).toEqual([]);
  });

  it('holds one tar stack: tar-stream, which the Kubernetes client brings too, and no other parser', async () => {
    const files = await bundledFiles('agentd.cjs');
    expect(files.some((f) => f.includes('node_modules/tar-stream/extract.js'))).toBe(true);
    expect(files.filter((f) => /node_modules\/(tar|minizlib|write-file-atomic)\//.test(f))).toEqual([]);
    // The project's own reader is the policy around tar-stream, not a parser of headers.
    expect(
      files
        .filter((f) => f.includes('src/provision/tar/'))
        .map((f) => path.basename(f))
        .sort(),
    ).toEqual(['entry-path.ts', 'entry-policy.ts', 'tar-reader.ts']);
  });
});

describe("agentctl's bundles", () => {
  it('carry the Kubernetes client and the fleet code only in agentctl-kube.cjs, which fleet pause|resume alone load', async () => {
    const own = await bundledFiles('agentctl.cjs');
    const libs = await bundledFiles('agentctl-libs.cjs');
    const kube = await bundledFiles('agentctl-kube.cjs');
    const client = (f: string) => f.includes('node_modules/@kubernetes/client-node/');
    const fleet = (f: string) => /(^|\/)src\/(fleet|kube)\//.test(f);
    expect(kube.some(client)).toBe(true);
    expect(kube.some((f) => f.endsWith('src/fleet/operator.ts'))).toBe(true);
    expect(kube.some((f) => f.endsWith('src/fleet/fleet-control.ts'))).toBe(true);
    for (const files of [own, libs]) {
      expect(files.filter(client)).toEqual([]);
      expect(files.filter(fleet)).toEqual([]);
    }
    // agentctl's own bundle has no zod either: the schemas stay with the code that needs them.
    expect(own.filter((f) => f.includes('node_modules/zod/'))).toEqual([]);
    // Its one way to the operator's code is the library bundle's property.
    const source = await readFile(path.join(REPO_ROOT, 'dist/agentctl.cjs'), 'utf8');
    expect(source).toContain('require("./agentctl-kube.cjs")["src/fleet/operator.ts"]');
  });
});
