/**
 * `npm run release`: build the release artifacts under release/ (or `--out DIR`):
 *
 *   agentd-<version>-linux-x64.tar.gz   agentd-<version>-linux-x64/ with the executable, install.sh,
 *                                       the unit, deploy/, docs/, man/, openapi/, examples/,
 *                                       README.md, LICENSE, THIRD-PARTY-NOTICES
 *   agentd_<version>_amd64.deb          the same executable, unit, man pages, docs and shell
 *                                       completions for dpkg; /usr/share/doc/agentd/copyright
 *                                       holds LICENSE and the third-party notices
 *   SHA256SUMS                          `sha256sum -c` format
 *
 * The executable is a Node single executable application: a small main that picks a program by
 * the name it was started as, in the pinned Node LTS runtime (node-runtime.ts), followed by the
 * program bundles (scripts/build.ts, the same files the tests run) and their code caches
 * (src/embedded.ts), so a host needs no Node, no npm and no network. `agentctl` is a symlink to
 * it. The layout is described in docs/operations.md ("The release artifacts").
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { appendFile, chmod, copyFile, cp, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { execa } from 'execa';
import { encodeEmbedded } from '../../src/embedded.js';
import { BUNDLES, RELEASE_NODE_OPTIONS, REPO_ROOT, RUNTIME_FLAGS, buildBundle, writeCodeCaches } from '../build.js';
import { addNotice, NOTICES_FILE } from '../notices.js';
import { ensureNodeRuntime, NODE_RUNTIME } from './node-runtime.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** The man pages `npm run generate` writes (docs/man/), shipped in both artifacts. */
const MAN_PAGES = ['agentd.8', 'agentctl.8'];

/**
 * What the docs link to besides each other (README.md, docs/*.md): shipped beside them, in the
 * tarball and in the .deb's /usr/share/doc/agentd, so every relative link resolves in both.
 */
const DOC_TREES = ['openapi', 'examples'];

/**
 * The .deb's Depends. systemd runs agentd and systemd-container has the machines' tools. The rest
 * is what the embedded Node.js runtime links (`readelf -d`: libatomic.so.1, libstdc++.so.6,
 * libgcc_s.so.1, and libc.so.6, libm, libdl, libpthread and the loader of libc6) and the newest
 * glibc symbol version it needs (`readelf -V`: GLIBC_2.28). The release system test checks both
 * against the executable. libgcc1 was libgcc-s1's name up to Debian 10.
 */
const DEB_DEPENDS = [
  'systemd',
  'systemd-container',
  'libc6 (>= 2.28)',
  'libstdc++6',
  'libgcc-s1 | libgcc1',
  'libatomic1',
];

/** Where the .deb installs `agentctl completion <shell>`: each shell's directory for packages. */
export const DEB_COMPLETIONS = {
  bash: 'usr/share/bash-completion/completions/agentctl',
  zsh: 'usr/share/zsh/vendor-completions/_agentctl',
  fish: 'usr/share/fish/vendor_completions.d/agentctl.fish',
} as const;

/**
 * The .deb's Maintainer: the project, with the address package.json's `author` gives (one place
 * to change it); refused when it has none, rather than a placeholder.
 */
export function debMaintainer(pkg: { author?: unknown }): string {
  const a = pkg.author;
  const text =
    typeof a === 'string'
      ? a
      : a && typeof a === 'object' && typeof (a as { name?: unknown }).name === 'string'
        ? `${(a as { name: string }).name} <${String((a as { email?: unknown }).email ?? '')}>`
        : '';
  if (!/^[^<>]+ <[^<>@\s]+@[^<>@\s]+\.[a-z]{2,}>$/i.test(text.trim())) {
    throw new Error(`package.json: author must be "Name <address>" for the .deb's Maintainer; got ${JSON.stringify(a)}`);
  }
  return text.trim();
}

/** The unit's ExecStart in systemd/agentd.service, rewritten for the .deb's /usr/bin. */
const UNIT_EXEC_START = 'ExecStart=/usr/local/bin/agentd';

export interface ReleaseResult {
  version: string;
  outDir: string;
  tarball: string;
  deb: string;
  sums: string;
  executableBytes: number;
  runtime: { version: string; cached: boolean; stripped: boolean };
}

const log = (msg: string): void => console.log(`release: ${msg}`);

async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Commit time of HEAD (reproducible timestamps in the archives), else now. */
async function sourceDateEpoch(root: string): Promise<number> {
  if (process.env.SOURCE_DATE_EPOCH) return Number(process.env.SOURCE_DATE_EPOCH);
  const git = await execa('git', ['log', '-1', '--format=%ct'], { cwd: root, reject: false });
  const t = Number(git.stdout.trim());
  return git.exitCode === 0 && Number.isInteger(t) && t > 0 ? t : Math.floor(Date.now() / 1000);
}

/** Run a command; on failure, throw with what was being done and the command's stderr. */
async function run(what: string, file: string, args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
  const r = await execa(file, args, { reject: false, env, extendEnv: true });
  if (r.exitCode !== 0 || r.failed) {
    throw new Error(`${what}: ${file} ${args.join(' ')} failed (exit ${r.exitCode}): ${(r.stderr || r.message || "").trim().slice(-800)}`);
  }
  return r.stdout;
}

/**
 * The runtime to embed: a stripped copy of the pinned node (its debug information is a quarter
 * of its size), or the node itself when `strip` is not installed (a larger, equally working file).
 */
async function embeddableNode(node: string, work: string): Promise<{ file: string; stripped: boolean }> {
  const which = await execa('sh', ['-c', 'command -v strip'], { reject: false });
  if (which.exitCode !== 0) {
    log('strip (binutils) is not installed: embedding the unstripped runtime');
    return { file: node, stripped: false };
  }
  const out = path.join(work, 'node');
  await run('strip the runtime', 'strip', ['-o', out, node]);
  return { file: out, stripped: true };
}

/** Build the single executable application `out` from the bundles in `root` and a runtime. */
async function buildExecutable(node: string, root: string, out: string, work: string): Promise<void> {
  const config = path.join(work, 'sea-config.json');
  // The bundles' V8 code caches, made by this runtime with the executable's flags (a cache made
  // by another runtime or with other flags would be rejected, silently, at every start).
  const caches = path.join(work, 'code-cache');
  await mkdir(caches, { recursive: true });
  const cacheFiles = writeCodeCaches({ root, node, flags: RUNTIME_FLAGS, outDir: caches });
  await writeFile(
    config,
    JSON.stringify({
      main: path.join(root, BUNDLES.seaMain),
      output: out,
      disableExperimentalSEAWarning: true,
      // Not the SEA's own code cache: it would cover only the small main (and V8 rejects, with a
      // warning, a cache made under other flags than RUNTIME_FLAGS). The bundles' caches are
      // embedded files (below) that the main hands to V8 (src/bin/load-bundle.ts).
      useCodeCache: false,
      // NODE_OPTIONS and the like are the host's, not a reason to change the agent's runtime.
      execArgvExtension: 'none',
      execArgv: [...RUNTIME_FLAGS, ...RELEASE_NODE_OPTIONS],
    }),
  );
  await run('build the single executable', node, ['--build-sea', config]);
  // The programs follow the executable's own bytes, not as the application's assets: those would
  // stay resident in every agentd once read (src/embedded.ts).
  const embedded = new Map<string, Buffer>();
  for (const [name, file] of [
    ['agentd.cjs', path.join(root, BUNDLES.agentd)],
    ['agentctl.cjs', path.join(root, BUNDLES.agentctl)],
    // The libraries only some agentctl commands use, loaded by agentctl's bundle on first use.
    ['agentctl-libs.cjs', path.join(root, BUNDLES.agentctlLibs)],
    // fleet pause|resume with the Kubernetes client, loaded by them alone.
    ['agentctl-kube.cjs', path.join(root, BUNDLES.agentctlKube)],
    // agentd's bundle starts the download worker from this file (src/provision/artifacts/sink.ts).
    ['sink-worker.cjs', path.join(root, BUNDLES.sinkWorker)],
    // Named as the main looks them up: by the runtime's and flags' key (src/bin/load-bundle.ts).
    ...Object.values(cacheFiles).map((f) => [path.basename(f), f] as const),
  ] as const) {
    embedded.set(name, await readFile(file));
  }
  await appendFile(out, encodeEmbedded(embedded));
  await chmod(out, 0o755);
}

/** Check the executable as a host would run it: no PATH, no node, no environment. */
async function checkExecutable(exe: string, version: string): Promise<void> {
  for (const name of ['agentd', 'agentctl']) {
    const argv0 = path.join(path.dirname(exe), name);
    const r = await execa(argv0, ['--version'], { env: {}, extendEnv: false, reject: false });
    if (r.exitCode !== 0 || r.stdout.trim() !== version) {
      throw new Error(
        `${argv0} --version with an empty environment: exit ${r.exitCode}, printed ${JSON.stringify(r.stdout)} (want ${version}); ${r.stderr.trim()}`,
      );
    }
  }
}

async function copyDocs(root: string, to: string): Promise<void> {
  await mkdir(to, { recursive: true });
  for (const entry of await readdir(path.join(root, 'docs'), { withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.md')) await copyFile(path.join(root, 'docs', entry.name), path.join(to, entry.name));
  }
}

/** Tar and gzip `dir` (a directory in `parent`) reproducibly: sorted, root-owned, fixed times. */
async function makeTarball(parent: string, dir: string, out: string, epoch: number): Promise<void> {
  const tarFile = `${out}.tar`;
  await run('pack the tarball', 'tar', [
    '--sort=name',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    `--mtime=@${epoch}`,
    '--format=gnu',
    '-C',
    parent,
    '-cf',
    tarFile,
    dir,
  ]);
  await run('compress the tarball', 'gzip', ['-n', '-6', '-f', tarFile]);
  if (`${tarFile}.gz` !== out) await run('name the tarball', 'mv', [`${tarFile}.gz`, out]);
}

/** Total size in KiB of the files under `dir` (the .deb's Installed-Size). */
async function installedKiB(dir: string): Promise<number> {
  let bytes = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) bytes += (await stat(path.join(entry.parentPath, entry.name))).size;
  }
  return Math.ceil(bytes / 1024);
}

async function makeDeb(o: {
  root: string;
  exe: string;
  /** `agentctl`, a link to the executable: it prints the completion scripts. */
  agentctl: string;
  version: string;
  maintainer: string;
  /** The third-party notices, runtime included. */
  notices: string;
  out: string;
  work: string;
  epoch: number;
}): Promise<void> {
  const pkg = path.join(o.work, 'deb');
  const usr = path.join(pkg, 'usr');
  await mkdir(path.join(usr, 'bin'), { recursive: true });
  await copyFile(o.exe, path.join(usr, 'bin', 'agentd'));
  await chmod(path.join(usr, 'bin', 'agentd'), 0o755);
  await symlink('agentd', path.join(usr, 'bin', 'agentctl'));

  // Debian installs programs in /usr/bin, never /usr/local: the unit's ExecStart follows.
  const unit = await readFile(path.join(o.root, 'systemd', 'agentd.service'), 'utf8');
  const lines = unit.split('\n').filter((l) => l === UNIT_EXEC_START);
  if (lines.length !== 1) throw new Error(`systemd/agentd.service: expected one line "${UNIT_EXEC_START}", found ${lines.length}`);
  const unitDir = path.join(usr, 'lib', 'systemd', 'system');
  await mkdir(unitDir, { recursive: true });
  await writeFile(path.join(unitDir, 'agentd.service'), unit.replace(UNIT_EXEC_START, 'ExecStart=/usr/bin/agentd'));

  const man = path.join(usr, 'share', 'man', 'man8');
  await mkdir(man, { recursive: true });
  for (const page of MAN_PAGES) {
    const text = await readFile(path.join(o.root, 'docs', 'man', page));
    await writeFile(path.join(man, `${page}.gz`), gzipSync(text, { level: 9 }));
  }
  const doc = path.join(usr, 'share', 'doc', 'agentd');
  await copyDocs(o.root, path.join(doc, 'docs'));
  await copyFile(path.join(o.root, 'README.md'), path.join(doc, 'README.md'));
  for (const tree of DOC_TREES) await cp(path.join(o.root, tree), path.join(doc, tree), { recursive: true });
  // Debian's place for the licences: agentd's own, then every bundled package's and the runtime's.
  const license = await readFile(path.join(o.root, 'LICENSE'), 'utf8');
  await writeFile(
    path.join(doc, 'copyright'),
    `agentd ${o.version}\n\nagentd is licensed under the Apache License 2.0:\n\n${license.trimEnd()}\n\n${o.notices}`,
  );
  // Each shell's completion, as `agentctl completion <shell>` prints it.
  for (const [shell, file] of Object.entries(DEB_COMPLETIONS)) {
    const script = await execa(o.agentctl, ['completion', shell]);
    await mkdir(path.dirname(path.join(pkg, file)), { recursive: true });
    await writeFile(path.join(pkg, file), `${script.stdout.trimEnd()}\n`);
  }
  await cp(path.join(o.root, 'deploy'), path.join(usr, 'share', 'agentd', 'deploy'), { recursive: true });
  // What the docs link to that the package installs elsewhere, under the names the links use
  // (relative links: they resolve inside the package, and on the host).
  await symlink('copyright', path.join(doc, 'LICENSE'));
  await symlink('copyright', path.join(doc, NOTICES_FILE));
  await symlink('../../agentd/deploy', path.join(doc, 'deploy'));
  await mkdir(path.join(doc, 'systemd'));
  await symlink('../../../../lib/systemd/system/agentd.service', path.join(doc, 'systemd', 'agentd.service'));

  const debian = path.join(pkg, 'DEBIAN');
  await mkdir(debian);
  const control = [
    'Package: agentd',
    `Version: ${o.version}`,
    'Architecture: amd64',
    `Maintainer: ${o.maintainer}`,
    `Installed-Size: ${await installedKiB(usr)}`,
    `Depends: ${DEB_DEPENDS.join(', ')}`,
    'Section: admin',
    'Priority: optional',
    'Description: node agent for Kubernetes worker hosts (blue/green nspawn machines)',
    ' agentd keeps the systemd-nspawn machine that runs kubelet at its desired',
    ' configuration and replaces it with a blue/green switch between kube1 and',
    ' kube2, driven through a JSON-RPC API on a unix socket (agentctl).',
    ' The executable embeds its Node.js runtime: no Node.js or npm is needed.',
    '',
  ].join('\n');
  await writeFile(path.join(debian, 'control'), control);
  for (const script of ['postinst', 'prerm', 'postrm']) {
    await copyFile(path.join(HERE, 'debian', script), path.join(debian, script));
    await chmod(path.join(debian, script), 0o755);
  }
  // gzip: quick on a 100 MB executable, and every dpkg reads it.
  await run(
    'build the .deb',
    'dpkg-deb',
    ['--root-owner-group', '-Zgzip', '-z6', '--build', pkg, o.out],
    { SOURCE_DATE_EPOCH: String(o.epoch) },
  );
}

/** Build every artifact into `outDir`; replaces the artifacts of the same version. */
export async function release(
  o: {
    root?: string;
    outDir?: string;
    /** Use the bundles in dist/ as they are (built by `npm run build`), e.g. while tests run from them. */
    skipBundle?: boolean;
  } = {},
): Promise<ReleaseResult> {
  const root = o.root ?? REPO_ROOT;
  const outDir = path.resolve(o.outDir ?? path.join(root, 'release'));
  const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as { version: string; author?: unknown };
  const { version } = pkg;
  const maintainer = debMaintainer(pkg);
  const epoch = await sourceDateEpoch(root);
  const work = await mkdtemp(path.join(os.tmpdir(), 'agentd-release-'));
  try {
    if (!o.skipBundle) {
      log(`bundling agentd ${version}`);
      await buildBundle(root);
    }
    const runtime = await ensureNodeRuntime();
    log(`Node ${runtime.version} runtime ${runtime.cached ? 'from the cache' : 'downloaded'}: ${runtime.node}`);
    const node = await embeddableNode(runtime.node, work);

    const name = `agentd-${version}-linux-x64`;
    const stage = path.join(work, 'tar', name);
    await mkdir(stage, { recursive: true });
    const exe = path.join(stage, 'agentd');
    await buildExecutable(node.file, root, exe, work);
    await symlink('agentd', path.join(stage, 'agentctl'));
    await checkExecutable(exe, version);

    await copyFile(path.join(HERE, 'install.sh'), path.join(stage, 'install.sh'));
    await chmod(path.join(stage, 'install.sh'), 0o755);
    await mkdir(path.join(stage, 'systemd'));
    await copyFile(path.join(root, 'systemd', 'agentd.service'), path.join(stage, 'systemd', 'agentd.service'));
    await cp(path.join(root, 'deploy'), path.join(stage, 'deploy'), { recursive: true });
    await copyDocs(root, path.join(stage, 'docs'));
    for (const tree of DOC_TREES) await cp(path.join(root, tree), path.join(stage, tree), { recursive: true });
    await mkdir(path.join(stage, 'man'));
    for (const page of MAN_PAGES) await copyFile(path.join(root, 'docs', 'man', page), path.join(stage, 'man', page));
    await copyFile(path.join(root, 'README.md'), path.join(stage, 'README.md'));
    await copyFile(path.join(root, 'LICENSE'), path.join(stage, 'LICENSE'));
    // What the bundles carry (scripts/build.ts wrote it from them) and the runtime inside.
    const notices = addNotice(await readFile(path.join(root, 'dist', NOTICES_FILE), 'utf8'), {
      title: `Node.js ${runtime.version} (the runtime inside the agentd executable; its LICENSE lists its own dependencies)`,
      text: await readFile(runtime.license, 'utf8'),
    });
    await writeFile(path.join(stage, NOTICES_FILE), notices);

    await mkdir(outDir, { recursive: true });
    const tarball = path.join(outDir, `${name}.tar.gz`);
    const deb = path.join(outDir, `agentd_${version}_amd64.deb`);
    const sums = path.join(outDir, 'SHA256SUMS');
    await rm(sums, { force: true });
    log(`packing ${path.basename(tarball)}`);
    await makeTarball(path.dirname(stage), name, tarball, epoch);
    log(`building ${path.basename(deb)}`);
    await makeDeb({ root, exe, agentctl: path.join(stage, 'agentctl'), version, maintainer, notices, out: deb, work, epoch });
    const lines = [];
    for (const file of [tarball, deb]) lines.push(`${await sha256(file)}  ${path.basename(file)}`);
    await writeFile(sums, `${lines.join('\n')}\n`);
    const executableBytes = (await stat(exe)).size;
    return {
      version,
      outDir,
      tarball,
      deb,
      sums,
      executableBytes,
      runtime: { version: NODE_RUNTIME.version, cached: runtime.cached, stripped: node.stripped },
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** `--out DIR` is the only option. */
function parseArgs(argv: string[]): { outDir?: string } {
  if (argv.length === 0) return {};
  if (argv[0] === '--out' && argv[1] && argv.length === 2) return { outDir: argv[1] };
  throw new Error(`usage: npm run release [-- --out DIR]; got ${JSON.stringify(argv)}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  Promise.resolve()
    .then(() => release(parseArgs(process.argv.slice(2))))
    .then(
      (r) => {
        log(`agentd executable: ${(r.executableBytes / 2 ** 20).toFixed(1)} MiB (Node ${r.runtime.version}${r.runtime.stripped ? ', stripped' : ''})`);
        for (const file of [r.tarball, r.deb, r.sums]) log(`wrote ${path.relative(process.cwd(), file) || file}`);
      },
      (err: unknown) => {
        console.error(`release: ${err instanceof Error ? err.message : String(err)}`);
        process.exitCode = 1;
      },
    );
}
