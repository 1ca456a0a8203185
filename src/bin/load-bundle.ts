/**
 * Load a program bundle (dist/agentd.cjs, dist/agentctl.cjs) as a CommonJS module through a V8
 * code cache, so that a start does not compile again what every start compiles
 * (docs/benchmarks.md, "CLI startup"). The npm bins (through dist/load-bundle.cjs) and the release
 * executable's main (dist/sea-main.cjs) load the bundles here; scripts/build.ts and the release
 * script make the caches with `writeCodeCache`.
 *
 * A cache is V8's own: it is used only by the V8 version and flags that made it, and V8 checks
 * that itself (`cachedDataRejected`); a rejected or missing cache only means compiling as
 * without one. Nothing here is needed for correctness.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Script } from 'node:vm';

/** A loaded bundle: the programs' bundles export `run()`. */
export interface ProgramBundle {
  run(): void;
}

/**
 * What a V8 code cache is valid for in this process: the runtime's V8 version and flags. V8
 * keeps them to itself; a cache's header carries them, so the key is taken from the cache of an
 * empty script (its first 16 bytes are the same for every script but the source's hash, bytes
 * 8 to 11, left out). The same runtime with the same flags gives the same key; with other flags
 * (`--max-semi-space-size=1` on Node 20, say) another one, and a cache made under one set of
 * flags is rejected under another (docs/benchmarks.md, "Footprint").
 */
export function codeCacheKey(): string {
  const header = new Script('').createCachedData().subarray(0, 16);
  return Buffer.concat([header.subarray(0, 8), header.subarray(12, 16)]).toString('hex');
}

/**
 * The bundle's code cache for this runtime and flags: a file next to the bundle (npm) or an
 * asset of that name (release). A bundle can have one per runtime and set of flags; a process
 * reads only its own.
 */
export const codeCacheName = (bundle: string): string => `${bundle}.${codeCacheKey()}.cache`;

/** CommonJS's module wrapper: the same text when the cache is made and when it is used. */
const wrap = (source: string): string =>
  `(function (exports, require, module, __filename, __dirname) {${source}\n})`;

/** Compile the bundle `file` (its `source`), with `cachedData` when given (see `cachedDataRejected`). */
export function compileBundle(file: string, source: string, cachedData: Buffer | undefined): Script {
  return new Script(wrap(source), { filename: file, ...(cachedData ? { cachedData } : {}) });
}

function evaluate(script: Script, o: { req: NodeJS.Require; filename: string }): ProgramBundle {
  const module = { exports: {} as ProgramBundle };
  const fn = script.runInThisContext() as (...args: unknown[]) => void;
  fn(module.exports, o.req, module, o.filename, path.dirname(o.filename));
  return module.exports;
}

/**
 * The `require` a bundle gets: built-in modules from `base`, and the bundles beside it, which it
 * names `./<name>.cjs` (a program's library bundle, scripts/build.ts), from `sibling`, each
 * evaluated once, on its first `require`.
 */
export function bundleRequire(base: NodeJS.Require, sibling: (name: string) => unknown): NodeJS.Require {
  const loaded = new Map<string, unknown>();
  const req = (id: string): unknown => {
    if (!id.startsWith('./')) return base(id);
    const name = id.slice(2);
    if (!loaded.has(name)) loaded.set(name, sibling(name));
    return loaded.get(name);
  };
  return Object.assign(req, {
    resolve: base.resolve,
    cache: base.cache,
    main: base.main,
    extensions: base.extensions,
  }) as NodeJS.Require;
}

/**
 * Evaluate `source`, named `file` in stack traces, with `cachedData` when given. The bundle gets
 * `o.req` as its `require` (the bundles require built-in modules only) and `o.filename` as its
 * `__filename` (what its `import.meta.url` stands for).
 */
export function loadBundleSource(
  file: string,
  source: string,
  cachedData: Buffer | undefined,
  o: { req: NodeJS.Require; filename: string },
): ProgramBundle {
  return evaluate(compileBundle(file, source, cachedData), o);
}

function readCodeCache(file: string): Buffer | undefined {
  try {
    return readFileSync(codeCacheName(file));
  } catch {
    return undefined;
  }
}

/**
 * The `require` of a bundle loaded from `file`: built-in modules through this module's own
 * `require` (this file is itself a CommonJS bundle, dist/load-bundle.cjs), not through
 * `module.createRequire`, whose module sets up the ES module loader the npm bins otherwise never
 * need (docs/benchmarks.md, "CLI startup"); its sibling bundles from its directory.
 */
function fileBundleRequire(file: string): NodeJS.Require {
  return bundleRequire(require, (name) => loadBundleFile(path.join(path.dirname(file), name)));
}

/**
 * Load the bundle `file` from disk, with its cache file when there is one; the bundles it
 * requires (`./<name>.cjs`) are loaded the same way from its directory.
 */
export function loadBundleFile(file: string): ProgramBundle {
  const req = fileBundleRequire(file);
  return loadBundleSource(file, readFileSync(file, 'utf8'), readCodeCache(file), { req, filename: file });
}

/**
 * Make the code cache of the bundle `file`: load it, run it with `argv` (a representative
 * command, so that what the command compiles is in the cache too), and write the cache into
 * `outDir` (as `codeCacheName`) when the process exits. Run in a child process of the runtime
 * and V8 flags the cache is for.
 */
export function writeCodeCache(file: string, argv: string[], outDir: string): void {
  const out = path.join(outDir, codeCacheName(path.basename(file)));
  const script = compileBundle(file, readFileSync(file, 'utf8'), undefined);
  process.on('exit', () => writeFileSync(out, script.createCachedData()));
  process.argv = [process.argv[0] ?? 'node', path.basename(file, '.cjs'), ...argv];
  evaluate(script, { req: fileBundleRequire(file), filename: file }).run();
}
