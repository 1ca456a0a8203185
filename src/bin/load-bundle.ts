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
import { createRequire } from 'node:module';
import path from 'node:path';
import { Script } from 'node:vm';

/** A loaded bundle: the programs' bundles export `run()`. */
export interface ProgramBundle {
  run(): void;
}

/** The bundle's code cache file: next to the bundle (npm) or an asset of that name (release). */
export const codeCacheName = (bundle: string): string => `${bundle}.cache`;

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

/** Load the bundle `file` from disk, with its cache file when there is one. */
export function loadBundleFile(file: string): ProgramBundle {
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(codeCacheName(file));
  } catch {
    cachedData = undefined;
  }
  return loadBundleSource(file, readFileSync(file, 'utf8'), cachedData, {
    req: createRequire(file),
    filename: file,
  });
}

/**
 * Make the code cache of the bundle `file`: load it, run it with `argv` (a representative
 * command, so that what the command compiles is in the cache too), and write the cache to `out`
 * when the process exits. Run in a child process of the runtime and V8 flags the cache is for.
 */
export function writeCodeCache(file: string, argv: string[], out: string): void {
  const script = compileBundle(file, readFileSync(file, 'utf8'), undefined);
  process.on('exit', () => writeFileSync(out, script.createCachedData()));
  process.argv = [process.argv[0] ?? 'node', path.basename(file, '.cjs'), ...argv];
  evaluate(script, { req: createRequire(file), filename: file }).run();
}
