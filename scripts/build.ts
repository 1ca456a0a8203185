/**
 * Bundle agentd and agentctl with esbuild, each into one CommonJS file (dist/agentd.cjs,
 * dist/agentctl.cjs), and write the two npm bins (dist/bin/agentd.js, dist/bin/agentctl.js) that
 * run them. The release executable (scripts/release/) embeds the same two files, with
 * dist/sea-main.cjs choosing between them, so what the tests run is what ships.
 * Run by `npm run build` after tsc (which still emits dist/ for the sim executables).
 *
 * Two bundles, not one: V8 parses a whole script before running it, and agentctl must not pay
 * for parsing the daemon (Kubernetes client, fastify, provisioning). CommonJS, because a single
 * executable application's script can `require` built-ins only and cannot `import()` files; lazy
 * `import()`s inside a bundle become lazily evaluated functions in the same file.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type BuildOptions, type Metafile, type Plugin } from 'esbuild';
import { bundledPackages, NOTICES_FILE, renderNotices } from './notices.js';

/** The repository root (this file is scripts/build.ts). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The bundles, relative to the repository root: each program's, and the release executable's main. */
export const BUNDLES = {
  agentd: 'dist/agentd.cjs',
  agentctl: 'dist/agentctl.cjs',
  seaMain: 'dist/sea-main.cjs',
  /** The download worker (src/provision/artifacts/sink-worker.ts), started by agentd's bundle. */
  sinkWorker: 'dist/sink-worker.cjs',
  /** Loads a program bundle through its V8 code cache (src/bin/load-bundle.ts): the npm bins. */
  loadBundle: 'dist/load-bundle.cjs',
  /** The libraries only some agentctl commands use (LIBRARY_BUNDLES), loaded on first use. */
  agentctlLibs: 'dist/agentctl-libs.cjs',
  /** `fleet pause|resume` with the Kubernetes client (LIBRARY_BUNDLES, `apart`), loaded by them alone. */
  agentctlKube: 'dist/agentctl-kube.cjs',
} as const;

/**
 * A program's libraries that only some of its commands use, bundled apart from the program (in
 * `dist/<program>-libs.cjs`) so that a command that does not use them never reads, compiles or
 * keeps their source: agentctl's bundle was ~1 MiB, four fifths of it undici (`uninstall`), yaml
 * (`--config` files), execa and pino (the host code of `uninstall`), while `status` needs only
 * commander (docs/benchmarks.md, "CLI startup"). The program's bundle has every other package
 * (`keep`) and its own code; each import of a library becomes `require('./<program>-libs.cjs')`
 * and that library's property, read only when the importing module first runs. One copy of each
 * library, in one place: the program shares no module state with it but what it imports.
 */
export const LIBRARY_BUNDLES: Readonly<
  Record<'agentctl', { keep: readonly string[]; apart: Readonly<Record<string, readonly string[]>> }>
> = {
  agentctl: {
    keep: ['commander'],
    /**
     * Source modules bundled apart with all they import, libraries included, into
     * `dist/<program>-<name>.cjs`; the program's imports of them read them from there.
     * src/fleet/operator.ts is `fleet pause|resume`, which act with the operator's kubeconfig
     * (docs/fleet.md): it carries the Kubernetes client (~2 MiB), zod and the fleet's code,
     * which no other command uses. In agentctl's bundle they would be parsed at every start; in
     * the library bundle, by every command that reads a `--config` file or uninstalls. Apart,
     * it has copies of its own of what else it shares with agentctl (yaml, src/errors.ts): it
     * hands agentctl plain values and errors, which agentctl reads by their `code`.
     */
    apart: { kube: ['src/fleet/operator.ts'] },
  },
};

/** The file name of a program's library bundle (`libs`, or an `apart` one), as its bundle requires it and as an asset. */
export const libsBundleName = (program: string, name = 'libs'): string => `${program}-${name}.cjs`;

/**
 * The programs whose bundles get a V8 code cache, with the command run to make it: what every
 * start compiles, and for agentctl the `status` path (against no daemon: it fails at the connect,
 * after loading what a status call loads).
 */
export const CODE_CACHE_RUNS = {
  agentd: ['--version'],
  agentctl: ['--socket', '/nonexistent/agentd.sock', '--json', 'status'],
} as const;

/** The oldest runtime the bundle must run on: package.json's engines.node. */
const TARGET = 'node20.19';

/**
 * Optional native helpers that `ws` tries to `require` inside try/catch; they are not installed,
 * so they stay outside the bundle and `ws` uses its JavaScript fallback.
 */
const OPTIONAL_EXTERNALS = ['bufferutil', 'utf-8-validate'];

/**
 * V8 flags the release executable runs with (its `execArgv`); the benches run the npm path's
 * daemon with them too (`npm start` and the npm bins run plain `node`):
 * - `--single-threaded-gc`: V8 collects garbage on the main thread only, with no parallel
 *   scavenges and no concurrent marking. A host agent's heap is small (~25 MB): a full
 *   collection marks in ~0.1 ms steps and ends in one pause of 3–40 ms, and it leaves the host's
 *   other cores to kubelet and containerd. Measured on 2 cores, 41 paired rounds: `status` at
 *   0.85 of a bare server instead of 0.80, and 0.87 instead of 0.79 of its CPU per call. The
 *   release's idle memory is unchanged; the npm path under Node 20 idles ~85 MiB with it, where
 *   V8 11's memory reducer sometimes reached 75–77 without (docs/benchmarks.md, "RPC",
 *   "Footprint").
 *
 * Flags tried and not kept (docs/benchmarks.md, "Footprint", "RPC" and "CLI startup"):
 * - `--max-semi-space-size=1` (a 1 MiB young generation) left the idle release daemon's memory
 *   where it was on Node 26 (91.7 against 92.2 MiB), whose V8 shrinks the young generation of an
 *   idle process itself, and cost it a fifth of its RPC throughput (0.68 against 0.84 of a bare
 *   server); only Node 20's V8 keeps a grown young generation;
 * - `--optimize-for-size` saved no idle memory and cost a quarter of the RPC throughput;
 * - any flag the runtime's V8 puts in its code caches' flag hash (`--bytecode-old-age=1`, for one)
 *   makes V8 reject Node's embedded cache of its built-in modules, and every start, agentctl's
 *   too, compiles them from source. `--single-threaded-gc` is not in the hash;
 * - `--bytecode-old-age=1`, also when set at run time once serving (until 2026-11-27): in bursts
 *   of calls with idle gaps, the daemon fell after ~40 s to ~0.7 of a bare server's throughput
 *   and stayed there (median 0.73 against 0.89 without it, same rounds), for no idle memory the
 *   release executable could measure (docs/benchmarks.md, "RPC", and that file's history).
 * A flag added here must leave the flag hash alone (test/system/release.test.ts checks).
 */
export const RUNTIME_FLAGS: readonly string[] = ['--single-threaded-gc'];

/**
 * Node.js options (not V8 flags: the code caches' flag hash is left alone) of the release
 * executable alone; the npm path runs on Node.js 20, which has none of them:
 * - `--use-system-ca`: TLS trusts the host's certificate store besides Node's bundled list, as
 *   curl and the node's Go tools do (src/outbound-http.ts). Node builds that store natively, once,
 *   at the first TLS connection that names no CA of its own: ~0.2 MiB more than the bundled list
 *   alone, where adding the same certificates from JavaScript costs ~6 MiB.
 * - `--disable-sigusr1`: SIGUSR1 never opens the inspector on 127.0.0.1:9229, from the first
 *   instant of the process (agentd's own handler, src/bin/agentd.ts, comes only once its main
 *   runs) and in agentctl too; the runtime then ignores the signal (docs/operations.md, "Signals").
 */
export const RELEASE_NODE_OPTIONS: readonly string[] = ['--use-system-ca', '--disable-sigusr1'];

/** What `import.meta.url` means in the bundle: the bundle's own URL (the executable's in a release). */
const IMPORT_META_URL = '__agentdImportMetaUrl';

/**
 * node-fetch 2 (under @kubernetes/client-node) loads `whatwg-url` only as a fallback for a
 * runtime without a global URL (`Url.URL || whatwgUrl.URL`), which Node always has; whatwg-url
 * in turn loads tr46, whose Unicode tables cost ~5 MiB of resident memory for nothing. The
 * bundle gets Node's own URL under that name instead (docs/benchmarks.md, "Footprint").
 */
const nodeUrlForWhatwgUrl: Plugin = {
  name: 'whatwg-url-is-node-url',
  setup(b) {
    b.onResolve({ filter: /^whatwg-url$/ }, () => ({ path: 'whatwg-url', namespace: 'agentd-node-url' }));
    b.onLoad({ filter: /.*/, namespace: 'agentd-node-url' }, () => ({
      contents: "module.exports = { URL: require('node:url').URL };",
      loader: 'js',
    }));
  },
};

/**
 * node-fetch 2 (under @kubernetes/client-node) parses every request's URL with the legacy
 * `url.parse()`, which Node 24 and later answer with a deprecation warning (DEP0169) in the
 * journal at the Machine watcher's first request. Its `require('url')` gets Node's `url` with a
 * `parse` on the WHATWG parser instead (src/kube/node-fetch-url.ts); every other package keeps
 * Node's own.
 */
const nodeFetchUrl = (root: string): Plugin => ({
  name: 'node-fetch-url',
  setup(b) {
    b.onResolve({ filter: /^url$/ }, (args) =>
      /[\\/]node_modules[\\/]node-fetch[\\/]/.test(args.importer)
        ? { path: path.join(root, 'src', 'kube', 'node-fetch-url.ts') }
        : undefined,
    );
  },
});

/**
 * Packages fastify requires only on paths agentd never takes, left out of the bundles: ~300 KB
 * of code the daemon would otherwise hold in memory as source for nothing (docs/benchmarks.md,
 * "Footprint"). Each maps to what agentd does instead; should anything require one, it gets an
 * error that says so.
 * - ajv and fast-json-stringify: fastify loads its default schema compilers only when it is
 *   given none; agentd gives its own (`NO_SCHEMA_COMPILERS`, src/server/app.ts), as its routes
 *   carry no JSON schemas.
 * - light-my-request: loaded by `app.inject()`, which only tests call (on the sources, not on
 *   the bundles).
 */
export const LEFT_OUT_PACKAGES: Readonly<Record<string, string>> = {
  '@fastify/ajv-compiler': 'fastify is given schemaController.compilersFactory (src/server/app.ts)',
  '@fastify/fast-json-stringify-compiler':
    'fastify is given schemaController.compilersFactory (src/server/app.ts)',
  'light-my-request': 'fastify inject() is for tests, which run the sources',
};

const leaveOutUnusedPackages: Plugin = {
  name: 'leave-out-unused-packages',
  setup(b) {
    const names = Object.keys(LEFT_OUT_PACKAGES).map((p) => p.replace(/[/.]/g, '\\$&'));
    b.onResolve({ filter: new RegExp(`^(${names.join('|')})$`) }, (args) => ({
      path: args.path,
      namespace: 'agentd-left-out',
    }));
    b.onLoad({ filter: /.*/, namespace: 'agentd-left-out' }, (args) => ({
      contents: `throw new Error(${JSON.stringify(
        `${args.path} is left out of agentd's bundles (scripts/build.ts): ${LEFT_OUT_PACKAGES[args.path] ?? ''}`,
      )});`,
      loader: 'js',
    }));
  },
};

/**
 * The npm bins are CommonJS (dist/bin/package.json says so; package.json's `"type": "module"`
 * would make them ES modules): running an ES module first sets up Node's ES module loader,
 * which a CommonJS main skips (docs/benchmarks.md, "CLI startup").
 */
/** A bare package specifier (`undici`, `@scope/pkg/sub`), not a built-in module or a path. */
const BARE_PACKAGE = /^(@[a-z0-9][^/]*\/)?[a-z0-9][^/:]*(\/.*)?$/;
const isBuiltin = (spec: string): boolean => builtinModules.includes(spec.split('/')[0] ?? spec);

/**
 * commander requires node:child_process at its start for executable subcommands (a command run
 * as a program of its own), which agentctl does not have: for its bundle, child_process is
 * loaded only if commander ever spawns, instead of at every start with net, dgram and the rest.
 */
const lazyChildProcessForCommander: Plugin = {
  name: 'lazy-child-process-for-commander',
  setup(b) {
    b.onResolve({ filter: /^node:child_process$/ }, (args) =>
      args.importer.includes('/node_modules/commander/')
        ? { path: 'child_process', namespace: 'agentd-lazy-child-process' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'agentd-lazy-child-process' }, () => ({
      contents: "module.exports = { spawn: (...args) => require('node:child_process').spawn(...args) };",
      loader: 'js',
    }));
  },
};

/**
 * For a program's bundle: every package it imports from its own source, except `keep`, is read
 * from its library bundle (LIBRARY_BUNDLES), and the names used are collected into `used`.
 */
function librariesFromLibsBundle(program: string, keep: readonly string[], used: Set<string>): Plugin {
  const libs = `./${libsBundleName(program)}`;
  return {
    name: 'libraries-from-libs-bundle',
    setup(b) {
      b.onResolve({ filter: BARE_PACKAGE }, (args) => {
        const pkg = args.path.startsWith('@')
          ? args.path.split('/').slice(0, 2).join('/')
          : args.path.split('/')[0];
        if (isBuiltin(args.path) || keep.includes(pkg ?? '') || args.importer.includes('/node_modules/'))
          return undefined;
        if (OPTIONAL_EXTERNALS.includes(args.path)) return undefined;
        used.add(args.path);
        return { path: args.path, namespace: 'agentd-libs' };
      });
      b.onResolve({ filter: new RegExp(`^\\./${program}-[a-z]+\\.cjs$`) }, (args) => ({
        path: args.path,
        external: true,
      }));
      b.onLoad({ filter: /.*/, namespace: 'agentd-libs' }, (args) => ({
        contents: `module.exports = require(${JSON.stringify(libs)})[${JSON.stringify(args.path)}];`,
        loader: 'js',
      }));
    },
  };
}

/**
 * For a program's bundle: its imports of the `apart` modules (LIBRARY_BUNDLES) are read from
 * their bundle, `<program>-<name>.cjs`, where each is a property named by its path.
 */
function modulesApart(
  program: string,
  root: string,
  apart: Readonly<Record<string, readonly string[]>>,
): Plugin {
  const bundleOf = new Map(
    Object.entries(apart).flatMap(([name, modules]) =>
      modules.map((m) => [m, libsBundleName(program, name)] as const),
    ),
  );
  // The import paths that may name one: `…/operator.js` for src/fleet/operator.ts.
  const names = [...bundleOf.keys()].map((m) => path.basename(m, '.ts').replace(/[.]/g, '\\.'));
  return {
    name: 'modules-apart',
    setup(b) {
      b.onResolve({ filter: new RegExp(`(^|/)(${names.join('|')})\\.js$`) }, (args) => {
        if (args.importer === '' || args.importer.includes('/node_modules/')) return undefined;
        const target = path
          .relative(root, path.resolve(path.dirname(args.importer), args.path))
          .replace(/\.js$/, '.ts');
        const file = bundleOf.get(target);
        return file === undefined
          ? undefined
          : { path: target, namespace: 'agentd-apart', pluginData: { file } };
      });
      b.onLoad({ filter: /.*/, namespace: 'agentd-apart' }, (args) => ({
        contents: `module.exports = require(${JSON.stringify(`./${(args.pluginData as { file: string }).file}`)})[${JSON.stringify(args.path)}];`,
        loader: 'js',
      }));
    },
  };
}

/** The entry of a library bundle: each library a getter, evaluated when first read. */
const libsEntry = (names: Iterable<string>): string =>
  `module.exports = {\n${[...names]
    .sort()
    .map((n) => `  get ${JSON.stringify(n)}() { return require(${JSON.stringify(n)}); },`)
    .join('\n')}\n};\n`;

/** The entry of a bundle of modules apart: each a getter named by its path, as modulesApart reads it. */
const apartEntry = (modules: readonly string[]): string =>
  `module.exports = {\n${modules
    .map((m) => `  get ${JSON.stringify(m)}() { return require(${JSON.stringify(`./${m}`)}); },`)
    .join('\n')}\n};\n`;

const binWrapper = (program: string): string =>
  [
    '#!/usr/bin/env node',
    `// Generated by scripts/build.ts: runs ${program} from the bundle (the release executable runs the same file).`,
    "'use strict';",
    "const path = require('node:path');",
    '',
    `require('../load-bundle.cjs').loadBundleFile(path.join(__dirname, '..', '${program}.cjs')).run();`,
    '',
  ].join('\n');

/** dist/bin/package.json: the bins in it are CommonJS. */
const BIN_PACKAGE_JSON = `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`;

/**
 * Write the V8 code cache of each program bundle in `root`/dist to `outDir`, made by `node`
 * with V8 `flags`: a cache serves only the runtime and flags that made it, so its file name
 * carries their key (`<bundle>.<key>.cache`, src/bin/load-bundle.ts). Each is made in a child
 * process that runs the program's CODE_CACHE_RUNS command. Returns each program's cache file.
 */
export function writeCodeCaches(o: {
  root: string;
  node: string;
  flags: readonly string[];
  outDir: string;
}): Record<keyof typeof CODE_CACHE_RUNS, string> {
  const loader = path.join(o.root, BUNDLES.loadBundle);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir() };
  const inChild = (code: string, stdout: 'ignore' | 'pipe') =>
    spawnSync(o.node, [...o.flags, '-e', code], { env, stdio: ['ignore', stdout, 'pipe'], timeout: 60_000 });
  const keyRun = inChild(`process.stdout.write(require(${JSON.stringify(loader)}).codeCacheKey())`, 'pipe');
  const key = keyRun.stdout?.toString() ?? '';
  if (keyRun.status !== 0 || !/^[0-9a-f]+$/.test(key)) {
    throw new Error(
      `code cache key of ${o.node} ${o.flags.join(' ')}: ${keyRun.error?.message ?? keyRun.stderr.toString().trim().slice(-500)}`,
    );
  }
  const written: Partial<Record<keyof typeof CODE_CACHE_RUNS, string>> = {};
  for (const [program, argv] of Object.entries(CODE_CACHE_RUNS)) {
    const bundle = path.join(o.root, 'dist', `${program}.cjs`);
    const out = path.join(o.outDir, `${program}.cjs.${key}.cache`);
    const r = inChild(
      `require(${JSON.stringify(loader)}).writeCodeCache(${JSON.stringify(bundle)}, ${JSON.stringify(argv)}, ${JSON.stringify(o.outDir)})`,
      'ignore',
    );
    if (r.error || !existsSync(out)) {
      throw new Error(
        `code cache of ${program}: ${o.node} ${o.flags.join(' ')} -e …: ${r.error?.message ?? r.stderr.toString().trim().slice(-500)}`,
      );
    }
    written[program as keyof typeof CODE_CACHE_RUNS] = out;
  }
  return written as Record<keyof typeof CODE_CACHE_RUNS, string>;
}

/**
 * The dynamic `import()`s of a module left out of the bundles (a built-in module) in `meta`'s
 * outputs, as `<output>: import('<module>')`. esbuild keeps such an `import()` as it is in the
 * CommonJS bundles, and the loader evaluates a bundle as a script (src/bin/load-bundle.ts), where
 * a dynamic import fails, and only when it is reached; buildBundle refuses them.
 */
export function externalDynamicImports(meta: Pick<Metafile, 'outputs'>): string[] {
  return Object.entries(meta.outputs).flatMap(([output, o]) =>
    o.imports
      .filter((i) => i.kind === 'dynamic-import' && i.external)
      .map((i) => `${output}: import('${i.path}')`),
  );
}

/** Bundle and write the bins; returns esbuild's metafile (inputs and output sizes). */
export async function buildBundle(root: string = REPO_ROOT): Promise<Metafile> {
  const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as { version: string };
  const common = {
    absWorkingDir: root,
    outdir: 'dist',
    outExtension: { '.js': '.cjs' },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: TARGET,
    // Smaller to parse and to keep in memory; the source map keeps stack traces readable.
    minify: true,
    sourcemap: 'linked',
    legalComments: 'none',
    define: { __AGENTD_VERSION__: JSON.stringify(pkg.version), 'import.meta.url': IMPORT_META_URL },
    // CommonJS has no import.meta: give modules that use it this file's URL instead of nothing.
    banner: { js: `var ${IMPORT_META_URL}=require('node:url').pathToFileURL(__filename).href;` },
    external: OPTIONAL_EXTERNALS,
    plugins: [nodeUrlForWhatwgUrl, nodeFetchUrl(root), leaveOutUnusedPackages],
    metafile: true,
    logLevel: 'warning',
  } satisfies BuildOptions;
  const main = await build({
    ...common,
    entryPoints: {
      agentd: 'src/bin/agentd.ts',
      'sea-main': 'src/bin/sea-main.ts',
      'sink-worker': 'src/provision/artifacts/sink-worker.ts',
      'load-bundle': 'src/bin/load-bundle.ts',
    },
  });
  const metafile: Metafile = { inputs: { ...main.metafile.inputs }, outputs: { ...main.metafile.outputs } };
  const entries = { agentctl: 'src/bin/agentctl.ts' } as const;
  for (const [program, { keep, apart }] of Object.entries(LIBRARY_BUNDLES)) {
    const used = new Set<string>();
    const own = await build({
      ...common,
      entryPoints: { [program]: entries[program as keyof typeof entries] },
      plugins: [
        nodeUrlForWhatwgUrl,
        leaveOutUnusedPackages,
        lazyChildProcessForCommander,
        modulesApart(program, root, apart),
        librariesFromLibsBundle(program, keep, used),
      ],
    });
    const bundleOf = (file: string, contents: string) =>
      build({
        ...common,
        entryPoints: undefined,
        outdir: undefined,
        outfile: path.join('dist', file),
        stdin: { contents, resolveDir: root, sourcefile: file.replace(/\.cjs$/, '-entry.js'), loader: 'js' },
      });
    const libs = await bundleOf(libsBundleName(program), libsEntry(used));
    const aparts = [];
    for (const [name, modules] of Object.entries(apart))
      aparts.push(await bundleOf(libsBundleName(program, name), apartEntry(modules)));
    for (const r of [own, libs, ...aparts]) {
      Object.assign(metafile.inputs, r.metafile.inputs);
      Object.assign(metafile.outputs, r.metafile.outputs);
    }
  }
  // The licence of every package the bundles carry, from what they carry (scripts/notices.ts).
  const packages = await bundledPackages(root, Object.keys(metafile.inputs));
  await mkdir(path.join(root, 'dist'), { recursive: true });
  await writeFile(path.join(root, 'dist', NOTICES_FILE), renderNotices(packages));
  const dynamic = externalDynamicImports(metafile);
  if (dynamic.length > 0) {
    throw new Error(
      `the bundles import() modules left outside them, which the bundles' loader cannot run: ${dynamic.join(', ')}; load a built-in module with process.getBuiltinModule instead`,
    );
  }
  const binDir = path.join(root, 'dist', 'bin');
  await mkdir(binDir, { recursive: true });
  await writeFile(path.join(binDir, 'package.json'), BIN_PACKAGE_JSON);
  for (const program of ['agentd', 'agentctl']) {
    const file = path.join(binDir, `${program}.js`);
    await writeFile(file, binWrapper(program));
    await chmod(file, 0o755);
  }
  // For the npm bins, on this runtime: without V8 flags (a bin runs `node` plain), and with the
  // release's RUNTIME_FLAGS when there are any: without a cache of its own, a run under other
  // flags compiles the whole bundle, whose parse alone raised agentd's resident memory by
  // ~27 MiB (docs/benchmarks.md, "Footprint").
  const dist = path.join(root, 'dist');
  for (const stale of (await readdir(dist)).filter((f) => f.endsWith('.cache')))
    await rm(path.join(dist, stale));
  for (const flags of RUNTIME_FLAGS.length > 0 ? [[], RUNTIME_FLAGS] : [[]])
    writeCodeCaches({ root, node: process.execPath, flags, outDir: dist });
  return metafile;
}

// Run only when executed (`tsx scripts/build.ts`), not when imported by the release script.
if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  buildBundle().then(
    (meta) => {
      for (const file of Object.values(BUNDLES)) {
        console.log(`wrote ${file} (${((meta.outputs[file]?.bytes ?? 0) / 1024).toFixed(0)} KiB)`);
      }
      console.log(
        'wrote dist/bin/agentd.js and dist/bin/agentctl.js, and the code caches dist/{agentd,agentctl}.cjs.<key>.cache',
      );
    },
    (err: unknown) => {
      console.error(`build: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    },
  );
}
