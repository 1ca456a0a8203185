/**
 * `npm run release` end to end: the artifacts exist with the documented layout and checksums,
 * every relative link of the shipped docs resolves inside each artifact, the man pages name every
 * shipped document, the .deb depends on what the executable links, the executable runs as agentd
 * and (through its symlink) as agentctl with an empty environment, install.sh installs
 * idempotently and restarts only on change, enables agentd on the first install only (an upgrade
 * keeps the operator's disable, a masked unit stays masked and stopped, and no link of the
 * operator's is replaced; without a running systemd: enables for the next boot only), and the
 * .deb's maintainer scripts behave on install,
 * upgrade, remove, a new install and purge, with and without a running systemd, under the real
 * dpkg and deb-systemd-helper (into a temp root, with a `systemctl` stand-in that records its
 * calls and keeps agentd's enable and run state). The artifacts are test/support/release.ts's,
 * built once per set of inputs and shared with the real-systemd suite, which installs them on a
 * real host. Needs tar, dpkg, dpkg-deb and openssl, and the Node runtime (cached after the first
 * run, fetched from the npm registry otherwise); the maintainer scripts' tests need
 * deb-systemd-helper and deb-systemd-invoke, the Depends check readelf and ldd. Skips without them
 * unless AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import {
  chmod,
  copyFile,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  realpath,
  rm,
  stat,
  symlink,
  truncate,
  writeFile,
} from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNTIME_FLAGS } from '../../scripts/build.js';
import { packageDirOf } from '../../scripts/notices.js';
import { ensureNodeRuntime } from '../../scripts/release/node-runtime.js';
import { DEB_COMPLETIONS, type ReleaseResult } from '../../scripts/release/release.js';
import { unitPaths } from '../../src/cli/uninstall/uninstall.js';
import { openEmbedded } from '../../src/embedded.js';
import { createHostPaths } from '../../src/host/paths.js';
import {
  DOWNLOAD_WORKER_UNAVAILABLE,
  WORKER_SINK_MIN_BYTES,
  WORKER_SINK_MIN_CPUS,
} from '../../src/provision/artifacts/sink.js';
import { startMirror } from '../../src/sim/mirror/index.js';
import { createOciImage } from '../../src/sim/mirror/oci-image.js';
import { REPO_ROOT, makeTempDir, waitUntil } from '../support/daemon.js';
import { mirrorAgentConfig, startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';
import { RELEASE_INPUTS, ensureRelease } from '../support/release.js';
import { makeTestCa } from '../support/test-ca.js';

const run = promisify(execFile);
const have = async (tool: string): Promise<boolean> =>
  run('sh', ['-c', `command -v ${tool}`]).then(
    () => true,
    () => false,
  );
const available =
  (await have('dpkg-deb')) && (await have('dpkg')) && (await have('tar')) && (await have('openssl'));
const required = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';
/** Whether a file or a link (dangling or not) is at `p`. */
const present = (p: string): Promise<boolean> =>
  lstat(p).then(
    () => true,
    () => false,
  );

// The .deb's maintainer scripts use init-system-helpers (Essential on Debian).
const debHelpers = (await have('deb-systemd-helper')) && (await have('deb-systemd-invoke'));
// The Depends check reads the executable's needs with binutils and the C library's ldd.
const elfTools = (await have('readelf')) && (await have('ldd'));

/** The .deb's unit, and the link that enables it (systemctl enable and deb-systemd-helper make it). */
const UNIT_PATH = '/usr/lib/systemd/system/agentd.service';
const WANTS_LINK = 'etc/systemd/system/multi-user.target.wants/agentd.service';
/** Where `systemctl mask --runtime agentd` links the unit to /dev/null. */
const RUNTIME_MASK = 'run/systemd/system/agentd.service';
/** Where install.sh installs the unit; a file there overrides a runtime mask. */
const TARBALL_UNIT = 'etc/systemd/system/agentd.service';
/** install.sh's record of its first install, in agentd's state directory. */
const INSTALL_MARKER = 'var/lib/agentd/install-sh.state';

interface FakeSystemctl {
  bin: string;
  /** Every call's arguments, as given. */
  calls(): Promise<string[]>;
  /** The calls that change something (no is-active/is-enabled), without options, since the last `take`. */
  take(): Promise<string[]>;
  /** agentd runs (`<dir>/active` exists). */
  active(): boolean;
}

/**
 * A directory with a `systemctl` stand-in that appends its arguments to `calls` and keeps the
 * state the scripts act on: agentd runs while `<dir>/active` exists (start and restart make it,
 * stop removes it), and is enabled while its multi-user.target.wants link under `root` exists,
 * where deb-systemd-helper makes it too (enable and disable make and remove it; `--now` also
 * starts or stops). A link from `<root>/run/systemd/system/agentd.service` to /dev/null masks it
 * (`mask --runtime`: is-enabled says masked-runtime) while, as with real systemd, no unit file in
 * `<root>/etc/systemd/system` overrides it.
 */
async function fakeSystemctl(dir: string, root = dir): Promise<FakeSystemctl> {
  const bin = path.join(dir, 'bin');
  await mkdir(bin, { recursive: true });
  const log = path.join(dir, 'calls');
  const active = path.join(dir, 'active');
  const wants = path.join(root, WANTS_LINK);
  await writeFile(log, '');
  await writeFile(
    path.join(bin, 'systemctl'),
    [
      '#!/bin/sh',
      `echo "$*" >> '${log}'`,
      'verb=; now=',
      'for a in "$@"; do',
      '  case "$a" in --now) now=1 ;; -*) ;; *) [ -n "$verb" ] || verb=$a ;; esac',
      'done',
      'case "$verb" in',
      `  is-active) [ -e '${active}' ]; exit $? ;;`,
      `  is-enabled) if [ ! -e '${path.join(root, TARBALL_UNIT)}' ] && [ "$(readlink '${path.join(root, RUNTIME_MASK)}')" = /dev/null ]; then echo masked-runtime; exit 1; fi`,
      `    if [ -L '${wants}' ]; then echo enabled; else echo disabled; exit 1; fi ;;`,
      `  start | restart) touch '${active}' ;;`,
      `  stop) rm -f '${active}' ;;`,
      `  enable) mkdir -p '${path.dirname(wants)}'; ln -sfn ${UNIT_PATH} '${wants}'; [ -z "$now" ] || touch '${active}' ;;`,
      `  disable) rm -f '${wants}'; [ -z "$now" ] || rm -f '${active}' ;;`,
      'esac',
      'exit 0',
      '',
    ].join('\n'),
  );
  await chmod(path.join(bin, 'systemctl'), 0o755);
  const calls = async (): Promise<string[]> => (await readFile(log, 'utf8')).split('\n').filter(Boolean);
  let taken = 0;
  return {
    bin,
    calls,
    async take() {
      const all = await calls();
      const fresh = all.slice(taken);
      taken = all.length;
      return fresh
        .map((c) =>
          c
            .split(' ')
            .filter((a) => !a.startsWith('-') || a === '--now')
            .join(' '),
        )
        .filter((c) => !/^is-(active|enabled)\b/.test(c));
    },
    active: () => existsSync(active),
  };
}

/** The environment with `bin` first on PATH (where a stand-in systemctl is). */
const envWith = (bin: string): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${bin}:${process.env.PATH}`,
});

/**
 * A temp root for install.sh (its DESTDIR) with the systemctl stand-in on PATH; with `systemd`
 * (the default) `<root>/run/systemd/system` exists, so install.sh takes systemd for running.
 */
async function installRoot(o: { systemd?: boolean } = {}): Promise<{
  work: string;
  root: string;
  sd: FakeSystemctl;
  env: NodeJS.ProcessEnv;
}> {
  const work = await makeTempDir('agentd-install-');
  const root = path.join(work, 'root');
  if (o.systemd !== false) await mkdir(path.join(root, 'run', 'systemd', 'system'), { recursive: true });
  const sd = await fakeSystemctl(work, root);
  return { work, root, sd, env: { ...envWith(sd.bin), DESTDIR: root } };
}

/** The relative targets of a Markdown text's inline links and images, outside code. */
function relativeLinks(markdown: string): string[] {
  const text = markdown.replace(/^(```|~~~)[\s\S]*?^\1/gm, '').replace(/`[^`]*`/g, '');
  return [...text.matchAll(/\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)/g)]
    .map((m) => m[1]!)
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && !t.startsWith('#'));
}

/**
 * Every relative link of every Markdown file under `docs`, as `file -> target`, and those whose
 * target is missing or (through a symlink) outside `top`, the unpacked artifact.
 */
async function docLinks(top: string, docs: string): Promise<{ checked: string[]; broken: string[] }> {
  const realTop = await realpath(top);
  const checked: string[] = [];
  const broken: string[] = [];
  for (const e of await readdir(docs, { recursive: true, withFileTypes: true })) {
    if (!e.isFile() || !e.name.endsWith('.md')) continue;
    const file = path.join(e.parentPath, e.name);
    for (const link of relativeLinks(await readFile(file, 'utf8'))) {
      const name = `${path.relative(docs, file)} -> ${link}`;
      checked.push(name);
      const target = path.resolve(path.dirname(file), decodeURIComponent(link.split('#')[0]!));
      const real = await realpath(target).catch(() => undefined);
      if (!real || !(real === realTop || real.startsWith(`${realTop}/`))) broken.push(name);
    }
  }
  return { checked, broken };
}

describe.skipIf(!available && !required)('npm run release', () => {
  let r: ReleaseResult;
  let unpacked: string;
  let dir: string;

  beforeAll(async () => {
    // `release()` from the bundles as `npm test` built them (bundling again would rewrite dist/
    // under the test daemons other files start from it meanwhile: one started from a half-written
    // bundle and exited with "run is not a function"), built once per set of inputs and shared
    // with the real-host suite (test/support/release.ts; its key is checked below).
    r = await ensureRelease();
    unpacked = await makeTempDir('agentd-release-unpacked-');
    await run('tar', ['-xzf', r.tarball, '-C', unpacked]);
    dir = path.join(unpacked, `agentd-${r.version}-linux-x64`);
  }, 600_000);
  // Made in beforeAll, outside any test: makeTempDir leaves it to us.
  afterAll(async () => {
    if (unpacked) await rm(unpacked, { recursive: true, force: true });
  });

  it('writes the tarball, the .deb and SHA256SUMS that verify', async () => {
    expect(path.basename(r.tarball)).toBe(`agentd-${r.version}-linux-x64.tar.gz`);
    expect(path.basename(r.deb)).toBe(`agentd_${r.version}_amd64.deb`);
    const { stdout } = await run('sha256sum', ['-c', 'SHA256SUMS'], { cwd: r.outDir });
    expect(stdout.trim().split('\n').sort()).toEqual([
      `${path.basename(r.tarball)}: OK`,
      `${path.basename(r.deb)}: OK`,
    ]);
  });

  it('the tarball holds the executable, agentctl as a symlink, install.sh, unit, deploy, docs, API documents, examples and man pages', async () => {
    const { stdout } = await run('tar', ['-tzf', r.tarball]);
    const entries = stdout
      .trim()
      .split('\n')
      .map((e) => e.replace(/^[^/]+\//, ''));
    for (const want of [
      'agentd',
      'agentctl',
      'install.sh',
      'systemd/agentd.service',
      'deploy/machine-crd.yaml',
      'deploy/rbac.yaml',
      'docs/operations.md',
      'openapi/agentd.openapi.yaml',
      'examples/remediate-node.sh',
      'man/agentd.8',
      'man/agentctl.8',
      'README.md',
      'LICENSE',
    ]) {
      expect(entries).toContain(want);
    }
    expect(await readlink(path.join(dir, 'agentctl'))).toBe('agentd');
  });

  it('the tarball and the .deb carry the licence of every bundled package and of the Node.js runtime', async () => {
    // What the bundles carry, read from their source maps (not from the build's own list).
    const dirs = new Set<string>();
    for (const bundle of [
      'agentd.cjs',
      'agentctl.cjs',
      'agentctl-libs.cjs',
      'agentctl-kube.cjs',
      'sink-worker.cjs',
    ]) {
      const map = JSON.parse(await readFile(path.join(REPO_ROOT, 'dist', `${bundle}.map`), 'utf8')) as {
        sources: string[];
      };
      for (const source of map.sources) {
        const d = packageDirOf(path.relative(REPO_ROOT, path.resolve(REPO_ROOT, 'dist', source)));
        // A bundled package's own source map may name its sources outside any package
        // (`node_modules/src/utils.ts`): no package of the tree, nothing bundled from it.
        if (d !== null && existsSync(path.join(REPO_ROOT, d, 'package.json'))) dirs.add(d);
      }
    }
    expect(dirs.size).toBeGreaterThan(30);
    const notices = await readFile(path.join(dir, 'THIRD-PARTY-NOTICES'), 'utf8');
    const missing: string[] = [];
    for (const d of dirs) {
      const pkg = JSON.parse(await readFile(path.join(REPO_ROOT, d, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
      };
      const header = `\n${pkg.name} ${pkg.version} (`;
      const at = notices.indexOf(header);
      // Its section holds licence text: its own file's first lines where it ships one.
      const files = (await readdir(path.join(REPO_ROOT, d))).filter((f) => /^(licen[cs]e|copying)/i.test(f));
      const first =
        files[0] && (await readFile(path.join(REPO_ROOT, d, files[0]), 'utf8')).trim().slice(0, 120);
      if (at < 0 || (first && !notices.includes(first))) missing.push(`${pkg.name} ${pkg.version}`);
    }
    expect(missing).toEqual([]);
    const runtime = await ensureNodeRuntime();
    expect(notices).toContain(`\nNode.js ${runtime.version} (the runtime inside the agentd executable`);
    expect(notices).toContain((await readFile(runtime.license, 'utf8')).trim().slice(0, 200));

    const deb = await makeTempDir('agentd-release-deb-');
    try {
      await run('dpkg-deb', ['-x', r.deb, deb]);
      const copyright = await readFile(path.join(deb, 'usr/share/doc/agentd/copyright'), 'utf8');
      expect(copyright).toContain((await readFile(path.join(REPO_ROOT, 'LICENSE'), 'utf8')).trim());
      expect(copyright).toContain(notices.trim());
    } finally {
      await rm(deb, { recursive: true, force: true });
    }
  });

  it('the .deb names the project as its maintainer and installs the shell completions', async () => {
    const maintainer = (await run('dpkg-deb', ['-f', r.deb, 'Maintainer'])).stdout.trim();
    const pkg = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      author: string;
    };
    expect(maintainer).toBe(pkg.author);
    expect(maintainer).not.toMatch(/localhost|example|placeholder/i);
    const deb = await makeTempDir('agentd-release-deb-');
    try {
      await run('dpkg-deb', ['-x', r.deb, deb]);
      for (const [shell, file] of Object.entries(DEB_COMPLETIONS)) {
        const shipped = await readFile(path.join(deb, file), 'utf8');
        // What the shipped agentctl prints for that shell.
        const printed = (await run(path.join(dir, 'agentctl'), ['completion', shell])).stdout;
        expect(shipped, file).toBe(`${printed.trimEnd()}\n`);
        expect(shipped).toMatch(/agentctl/);
      }
      // bash reads it: the completion function is defined for agentctl.
      const bash = await run('bash', [
        '-c',
        `source ${path.join(deb, DEB_COMPLETIONS.bash)} && complete -p agentctl`,
      ]);
      expect(bash.stdout).toMatch(/ agentctl$/m);
    } finally {
      await rm(deb, { recursive: true, force: true });
    }
  });

  it('builds the shared artifacts from a key that covers every input of the release', async () => {
    const covered = (file: string): boolean =>
      RELEASE_INPUTS.some((input) => file === input || file.startsWith(`${input}/`));
    // Every file of the repository the release's code imports.
    const { metafile } = await build({
      absWorkingDir: REPO_ROOT,
      entryPoints: ['scripts/release/release.ts'],
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      packages: 'external',
      logLevel: 'silent',
    });
    const imported = Object.keys(metafile.inputs);
    expect(imported).toContain('src/embedded.ts');
    expect(imported.filter((f) => !covered(f))).toEqual([]);
    // Every file the tarball ships from the repository, with its content as in the repository.
    const { stdout } = await run('tar', ['-tzf', r.tarball]);
    const shipped = stdout
      .trim()
      .split('\n')
      .map((e) => e.replace(/^[^/]+\//, ''))
      // Made by the release, not copied: the executable, its link, the notices (tested below).
      .filter(
        (e) => e !== '' && !e.endsWith('/') && !['agentd', 'agentctl', 'THIRD-PARTY-NOTICES'].includes(e),
      );
    const source = (entry: string): string =>
      entry === 'install.sh'
        ? 'scripts/release/install.sh'
        : entry.startsWith('man/')
          ? `docs/${entry}`
          : entry;
    expect(shipped.length).toBeGreaterThan(10);
    expect(shipped.map(source).filter((f) => !covered(f))).toEqual([]);
    for (const entry of shipped) {
      expect(await readFile(path.join(dir, entry)), entry).toEqual(
        await readFile(path.join(REPO_ROOT, source(entry))),
      );
    }
  });

  it('every relative link in the shipped docs resolves inside the tarball and inside the .deb', async () => {
    const tarball = await docLinks(dir, dir);
    const deb = await makeTempDir('agentd-release-deb-');
    await run('dpkg-deb', ['-x', r.deb, deb]);
    const doc = path.join(deb, 'usr/share/doc/agentd');
    const inDeb = await docLinks(deb, doc);
    expect(tarball.broken).toEqual([]);
    expect(inDeb.broken).toEqual([]);
    // What the docs link to besides each other, and each shipped document, was checked.
    for (const checked of [tarball.checked, inDeb.checked]) {
      for (const link of [
        'README.md -> examples/',
        'README.md -> LICENSE',
        'README.md -> systemd/agentd.service',
        'docs/api.md -> ../openapi/agentd.openapi.yaml',
        'docs/watcher.md -> ../deploy/rbac.yaml',
        'examples/README.md -> remediate-node.sh',
      ]) {
        expect(checked).toContain(link);
      }
    }
    // The .deb's links reach the files it installs (no copies that could differ).
    expect(await realpath(path.join(doc, 'systemd/agentd.service'))).toBe(
      await realpath(path.join(deb, 'usr/lib/systemd/system/agentd.service')),
    );
    expect(await realpath(path.join(doc, 'deploy'))).toBe(
      await realpath(path.join(deb, 'usr/share/agentd/deploy')),
    );
  });

  it('the man pages name every shipped document, are the same in both artifacts, and carry no Markdown', async () => {
    const docs = [
      'README.md',
      ...(await readdir(path.join(dir, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`),
      'openapi/',
      'examples/',
    ];
    expect(docs.length).toBeGreaterThan(10);
    const deb = await makeTempDir('agentd-release-deb-');
    await run('dpkg-deb', ['-x', r.deb, deb]);
    for (const page of ['agentd.8', 'agentctl.8']) {
      const text = await readFile(path.join(dir, 'man', page), 'utf8');
      for (const doc of docs) expect(text, `${page} names ${doc}`).toContain(doc);
      expect(text).toContain('/usr/share/doc/agentd');
      // Code spans are set in bold (\fB); a backtick, a link or ** would show as they are.
      expect(text.split('\n').filter((l) => /`|\]\(|\*\*/.test(l))).toEqual([]);
      expect(gunzipSync(await readFile(path.join(deb, 'usr/share/man/man8', `${page}.gz`))).toString()).toBe(
        text,
      );
    }
  });

  it.skipIf(!elfTools && !required)(
    'the .deb depends on the package of every shared library its executable needs, and on the glibc version it needs',
    async () => {
      const exe = path.join(dir, 'agentd');
      const needed = [
        ...(await run('readelf', ['-d', exe])).stdout.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g),
      ].map((m) => m[1]!);
      expect(needed).toContain('libc.so.6');
      // Where this host's loader finds each, and the package that owns it here.
      const resolved = new Map(
        [...(await run('ldd', [exe])).stdout.matchAll(/^\s*(\S+)(?: => (\S+))? \(0x/gm)].map((m) => [
          path.basename(m[1]!),
          m[2] ?? m[1]!,
        ]),
      );
      const owner = async (lib: string): Promise<string> => {
        const file = resolved.get(lib);
        expect(file, `ldd does not resolve ${lib}`).toBeDefined();
        // dpkg knows a file by the path its package ships, on either side of the merged /usr.
        const alt = file!.startsWith('/usr/') ? file!.slice(4) : `/usr${file}`;
        for (const candidate of [file!, alt, await realpath(file!)]) {
          const q = await run('dpkg', ['-S', candidate]).catch(() => undefined);
          if (q) return q.stdout.split(':')[0]!;
        }
        throw new Error(`no package owns ${file}`);
      };
      const depends = (await run('dpkg-deb', ['-f', r.deb, 'Depends'])).stdout.trim().split(/,\s*/);
      const names = depends.flatMap((d) => d.split(/\s*\|\s*/).map((alt) => alt.split(' ')[0]));
      for (const lib of needed) expect(names, `${lib} (${await owner(lib)})`).toContain(await owner(lib));
      // The newest glibc symbol version the executable needs is the least libc6 it depends on.
      const glibc = [...(await run('readelf', ['-V', exe])).stdout.matchAll(/Name: GLIBC_(\d+(?:\.\d+)*)/g)]
        .map((m) => m[1]!)
        .sort((a, b) => {
          const [x, y] = [a.split('.').map(Number), b.split('.').map(Number)];
          for (let i = 0; i < Math.max(x.length, y.length); i++)
            if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
          return 0;
        })
        .at(-1);
      expect(glibc).toBeDefined();
      expect(depends).toContain(`libc6 (>= ${glibc})`);
    },
  );

  it('the shipped operations.md numbers, in order, the steps the shipped agentctl uninstall reports', async () => {
    const work = await makeTempDir('agentd-release-uninstall-');
    // The simulated host under a temp root: nothing of this machine is touched.
    const uninstall = await run(
      path.join(dir, 'agentctl'),
      [
        '--socket',
        path.join(work, 'agentd.sock'),
        'uninstall',
        '--host',
        'sim',
        '--root',
        work,
        // No agentd answers to say where its state is: a --host sim uninstall is told.
        '--state-dir',
        path.join(work, 'state'),
        '--pid-file',
        path.join(work, 'agentd.pid'),
        '--yes',
        '--json',
      ],
      { env: {} },
    );
    const reported = (JSON.parse(uninstall.stdout) as { steps: { step: string }[] }).steps.map((s) => s.step);
    expect(reported.length).toBeGreaterThan(5);
    const ops = await readFile(path.join(dir, 'docs/operations.md'), 'utf8');
    const section = ops.slice(ops.indexOf('\n## Uninstall\n'));
    const items = [...section.matchAll(/^(\d+)\. `([a-z0-9-]+)`/gm)];
    expect(items.map((m) => Number(m[1]))).toEqual(reported.map((_s, i) => i + 1));
    expect(items.map((m) => m[2])).toEqual(reported);
  });

  it("runs with V8 flags its runtime leaves out of the code caches' flag hash, so Node's built-in cache is used", async () => {
    // A flag V8 hashes makes it reject Node's embedded cache of its built-in modules: every
    // start, agentctl's too, would compile them from source (docs/benchmarks.md, "CLI startup").
    const { node } = await ensureNodeRuntime();
    const hash = async (flags: readonly string[]): Promise<string> =>
      (
        await run(node, [
          ...flags,
          '-e',
          "process.stdout.write(new (require('node:vm').Script)('').createCachedData().subarray(12, 16).toString('hex'))",
        ])
      ).stdout;
    expect(await hash(RUNTIME_FLAGS)).toBe(await hash([]));
    // The check can fail: a hashed flag changes it.
    expect(await hash(['--bytecode-old-age=1'])).not.toBe(await hash([]));
  });

  it('carries code caches for its programs that its runtime, with its flags, accepts', async () => {
    // A cache V8 rejects is dropped without a word, and every start compiles the bundle from
    // source (docs/benchmarks.md, "CLI startup"): only this shows it.
    const { node } = await ensureNodeRuntime();
    const loader = path.join(REPO_ROOT, 'dist/load-bundle.cjs');
    const embedded = openEmbedded(path.join(dir, 'agentd'))!;
    const work = path.join(dir, 'cache-check');
    await mkdir(work, { recursive: true });
    for (const bundle of ['agentd.cjs', 'agentctl.cjs']) {
      // The name the executable's main looks its cache up by (src/bin/sea-main.ts).
      const name = (
        await run(node, [
          ...RUNTIME_FLAGS,
          '-e',
          `process.stdout.write(require(${JSON.stringify(loader)}).codeCacheName(${JSON.stringify(bundle)}))`,
        ])
      ).stdout;
      const source = embedded.read(bundle);
      const cache = embedded.read(name);
      expect(cache?.length, `${bundle}: no embedded ${name}`).toBeGreaterThan(1000);
      await writeFile(path.join(work, bundle), source!);
      await writeFile(path.join(work, name), cache!);
      const compile = (cacheFile: string): Promise<string> =>
        run(node, [
          ...RUNTIME_FLAGS,
          '-e',
          `const fs = require('fs'); const f = ${JSON.stringify(path.join(work, bundle))};` +
            `process.stdout.write(String(require(${JSON.stringify(loader)}).compileBundle(f, fs.readFileSync(f, 'utf8'), fs.readFileSync(${JSON.stringify(cacheFile)})).cachedDataRejected));`,
        ]).then((r) => r.stdout);
      expect(await compile(path.join(work, name)), bundle).toBe('false');
      // The check can fail: another bundle's cache is rejected.
      const other = bundle === 'agentd.cjs' ? 'agentctl.cjs' : 'agentd.cjs';
      const otherName = name.replace(bundle, other);
      await writeFile(path.join(work, `other-${otherName}`), embedded.read(otherName)!);
      expect(await compile(path.join(work, `other-${otherName}`)), bundle).toBe('true');
    }
  });

  it('carries its programs after every part of the file the kernel maps, so an idle agentd does not keep them resident', async () => {
    const exe = path.join(dir, 'agentd');
    const bytes = await readFile(exe);
    // The end of the last loadable segment (ELF64 program headers: type 1 is PT_LOAD).
    const phoff = Number(bytes.readBigUInt64LE(0x20));
    const phentsize = bytes.readUInt16LE(0x36);
    let mappedEnd = 0;
    for (let i = 0; i < bytes.readUInt16LE(0x38); i++) {
      const h = phoff + i * phentsize;
      if (bytes.readUInt32LE(h) !== 1) continue;
      mappedEnd = Math.max(mappedEnd, Number(bytes.readBigUInt64LE(h + 8) + bytes.readBigUInt64LE(h + 32)));
    }
    expect(bytes.toString('latin1', bytes.length - 16, bytes.length - 8)).toBe('AGENTDP1');
    const payloadStart = bytes.length - 16 - bytes.readUInt32LE(bytes.length - 4);
    expect(mappedEnd).toBeGreaterThan(0);
    expect(mappedEnd).toBeLessThanOrEqual(payloadStart);
    const embedded = openEmbedded(exe)!;
    for (const name of [
      'agentd.cjs',
      'agentctl.cjs',
      'agentctl-libs.cjs',
      'agentctl-kube.cjs',
      'sink-worker.cjs',
    ]) {
      expect(embedded.read(name)?.length, name).toBeGreaterThan(1000);
    }
  });

  it('a truncated executable says what is wrong and what to do, with exit 1', async () => {
    const copy = path.join(await makeTempDir('agentd-release-damaged-'), 'agentd');
    await copyFile(path.join(dir, 'agentd'), copy);
    await truncate(copy, (await stat(copy)).size - 16);
    const r = await run(copy, ['--version'], { env: {} }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `agentd: ${copy} cannot run: it carries none of its programs; install it again from the release artifact\n`,
    );
  });

  it.skipIf(availableParallelism() < WORKER_SINK_MIN_CPUS)(
    'hashes a large download on its download worker, started from the executable itself',
    async () => {
      // Random bytes do not compress: the gzip layer is as large as the file.
      const image = createOciImage({
        extraFiles: [{ path: 'opt/large.bin', content: randomBytes(WORKER_SINK_MIN_BYTES + 1024 * 1024) }],
      });
      const mirror = await startMirror({ image: () => image });
      try {
        const d = await startSimDaemon({ executable: path.join(dir, 'agentd') });
        const op = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
        expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
        expect(d.logs()).not.toContain(DOWNLOAD_WORKER_UNAVAILABLE);
      } finally {
        await mirror.close();
      }
    },
  );

  it("trusts the host's certificate store: a mirror signed by a CA only the store holds passes the preflight", async () => {
    const work = await makeTempDir('agentd-release-ca-');
    const ca = await makeTestCa(work);
    // Every artifact URL answers 200: the preflight's HEADs need nothing else.
    const mirror = https.createServer({ key: ca.key, cert: ca.cert }, (_req, res) => res.end());
    await new Promise<void>((resolve) => mirror.listen(0, '127.0.0.1', resolve));
    try {
      const url = `https://127.0.0.1:${(mirror.address() as AddressInfo).port}`;
      const artifactChecks = async (
        store: string,
      ): Promise<Array<{ name: string; ok: boolean; message: string }>> => {
        const d = await startSimDaemon({
          executable: path.join(dir, 'agentd'),
          env: { SSL_CERT_FILE: store, SSL_CERT_DIR: path.join(work, 'no-such-dir') },
        });
        const answer = (await d.rpc('update', {
          config: mirrorAgentConfig({ url, hostPort: '127.0.0.1:1' }),
          dryRun: true,
        })) as { result: { result: { preflight: Array<{ name: string; ok: boolean; message: string }> } } };
        await d.stop();
        return answer.result.result.preflight.filter((c) => c.name.startsWith('artifact'));
      };
      const trusted = await artifactChecks(ca.caFile);
      expect(trusted.length).toBeGreaterThan(0);
      expect(trusted.filter((c) => !c.ok)).toEqual([]);
      // The check can fail: with the CA out of the store, TLS refuses the mirror.
      const refused = await artifactChecks(ca.emptyFile);
      expect(refused.every((c) => !c.ok && /unable to verify/i.test(c.message))).toBe(true);
    } finally {
      await new Promise((resolve) => mirror.close(resolve));
    }
  });

  it('never opens the inspector on SIGUSR1: its runtime ignores the signal from the first instant (--disable-sigusr1)', async () => {
    const d = await startSimDaemon({ executable: path.join(dir, 'agentd') });
    d.proc.kill('SIGUSR1');
    // Signals are delivered in order of their number: once SIGUSR2 is logged, SIGUSR1 was handled.
    d.proc.kill('SIGUSR2');
    await waitUntil('SIGUSR2 logged', () => d.logs().includes('SIGUSR2 ignored'), d);
    // The runtime dropped SIGUSR1 before agentd's own handler (the npm package's way) saw it.
    expect(d.logs()).not.toContain('SIGUSR1 ignored');
    expect(d.logs()).not.toContain('Debugger listening');
    expect((await d.http('GET', '/readyz')).status).toBe(200);
    expect(await d.stop()).toBe(0);
  });

  it('runs with an empty environment (no node on PATH) as agentd and, by its name, as agentctl', async () => {
    const agentd = await run(path.join(dir, 'agentd'), ['--version'], { env: {} });
    expect(agentd.stdout.trim()).toBe(r.version);
    const help = await run(path.join(dir, 'agentd'), ['--help'], { env: {} });
    expect(help.stdout).toContain('AGENTD_SOCKET');
    const ctl = await run(path.join(dir, 'agentctl'), ['--help'], { env: {} });
    expect(ctl.stdout).toMatch(/^Usage: agentctl/);
  });

  it('install.sh installs, changes nothing on a second run, and restarts a running agentd on an upgrade', async () => {
    const { root, sd, env } = await installRoot();
    const install = (): Promise<{ stdout: string }> => run(path.join(dir, 'install.sh'), [], { env });

    const first = await install();
    expect(first.stdout).toContain(`installed ${root}/usr/local/bin/agentd`);
    expect(first.stdout).toContain('installed, enabled and running');
    expect(await readlink(path.join(root, 'usr/local/bin/agentctl'))).toBe('agentd');
    expect(await readFile(path.join(root, 'etc/systemd/system/agentd.service'), 'utf8')).toContain(
      'ExecStart=/usr/local/bin/agentd',
    );
    expect(await readFile(path.join(root, 'usr/local/share/man/man8/agentd.8'), 'utf8')).toContain(
      '.TH AGENTD 8',
    );
    expect(await sd.calls()).toEqual([
      'daemon-reload',
      'is-enabled agentd.service',
      'enable agentd.service',
      'start agentd.service',
    ]);
    expect(sd.active()).toBe(true);
    // The record of the first install, in a state directory made as agentd makes it.
    expect(await readFile(path.join(root, INSTALL_MARKER), 'utf8')).toBe('installed\n');
    expect((await stat(path.join(root, 'var/lib/agentd'))).mode & 0o777).toBe(0o700);
    const recorded = (await stat(path.join(root, INSTALL_MARKER))).mtimeMs;

    const second = await install();
    expect(second.stdout).not.toContain('installed /');
    expect(second.stdout).toContain('installed and running');
    expect((await sd.calls()).slice(4)).toEqual([
      'daemon-reload',
      'is-enabled agentd.service',
      'is-active --quiet agentd.service',
    ]);
    expect((await stat(path.join(root, INSTALL_MARKER))).mtimeMs).toBe(recorded);

    // An older executable in place while agentd runs: replaced, and agentd restarted on it.
    await writeFile(path.join(root, 'usr/local/bin/agentd'), 'old');
    const upgrade = await install();
    expect(upgrade.stdout).toContain('agentd restarted');
    expect(upgrade.stdout).not.toContain('stays');
    expect((await sd.calls()).slice(7)).toEqual([
      'daemon-reload',
      'is-enabled agentd.service',
      'is-active --quiet agentd.service',
      'restart agentd.service',
    ]);
  });

  it("install.sh enables agentd on the first install only: an upgrade keeps the operator's disable", async () => {
    const { root, sd, env } = await installRoot();
    const install = (): Promise<{ stdout: string }> => run(path.join(dir, 'install.sh'), [], { env });
    const systemctl = (...args: string[]) => run(path.join(sd.bin, 'systemctl'), args, { env });
    const enabled = (): Promise<boolean> => present(path.join(root, WANTS_LINK));
    const olderExecutable = () => writeFile(path.join(root, 'usr/local/bin/agentd'), 'old');

    await install();
    expect(await sd.take()).toEqual(['daemon-reload', 'enable agentd.service', 'start agentd.service']);
    expect([await enabled(), sd.active()]).toEqual([true, true]);

    // The operator's `systemctl disable --now agentd`: neither a rerun nor an upgrade undoes it.
    await systemctl('disable', '--now', 'agentd.service');
    await sd.take();
    const rerun = await install();
    expect(rerun.stdout).toContain('agentd.service stays disabled and stopped, as it was');
    await olderExecutable();
    const upgrade = await install();
    expect(upgrade.stdout).toContain(`installed ${root}/usr/local/bin/agentd`);
    expect(upgrade.stdout).toContain('stays disabled and stopped');
    expect(await sd.take()).toEqual(['daemon-reload', 'daemon-reload']);
    expect([await enabled(), sd.active()]).toEqual([false, false]);

    // Disabled but running (`systemctl start agentd`): restarted on the new executable only.
    await systemctl('start', 'agentd.service');
    await sd.take();
    expect((await install()).stdout).toContain(
      'installed and running (systemctl status agentd); agentd.service stays disabled, as it was',
    );
    expect(await sd.take()).toEqual(['daemon-reload']);
    await olderExecutable();
    expect((await install()).stdout).toContain('agentd restarted; agentd.service stays disabled, as it was');
    expect(await sd.take()).toEqual(['daemon-reload', 'restart agentd.service']);
    expect(await enabled()).toBe(false);

    // Enabled again and stopped: started, as the .deb's postinst does on an upgrade.
    await systemctl('enable', 'agentd.service');
    await systemctl('stop', 'agentd.service');
    await sd.take();
    expect((await install()).stdout).toContain('installed and started');
    expect(await sd.take()).toEqual(['daemon-reload', 'start agentd.service']);
    expect([await enabled(), sd.active()]).toEqual([true, true]);

    // No record but the unit in place (an install.sh from before the record): an upgrade, the
    // disable kept, and recorded from then on.
    await systemctl('disable', '--now', 'agentd.service');
    await rm(path.join(root, INSTALL_MARKER));
    await sd.take();
    expect((await install()).stdout).toContain('stays disabled and stopped');
    expect(await sd.take()).toEqual(['daemon-reload']);
    expect(await readFile(path.join(root, INSTALL_MARKER), 'utf8')).toBe('installed\n');

    // A first install that did not get to enabling agentd: the rerun finishes it.
    await writeFile(path.join(root, INSTALL_MARKER), 'first\n');
    expect((await install()).stdout).toContain('installed, enabled and running');
    expect(await sd.take()).toEqual(['daemon-reload', 'enable agentd.service', 'start agentd.service']);
    expect(await readFile(path.join(root, INSTALL_MARKER), 'utf8')).toBe('installed\n');
  });

  it('install.sh leaves a masked unit masked and does not start agentd', async () => {
    const { work, root, sd, env } = await installRoot();
    const install = (): Promise<{ stdout: string }> => run(path.join(dir, 'install.sh'), [], { env });
    const unit = path.join(root, 'etc/systemd/system/agentd.service');
    await install();
    await sd.take();

    // The unit linked to /dev/null, with agentd still running (a mask does not stop it), and a
    // new release: the link stays, the rest is installed, and agentd is neither started nor
    // restarted.
    await rm(unit);
    await symlink('/dev/null', unit);
    await rm(path.join(root, WANTS_LINK));
    await writeFile(path.join(root, 'usr/local/bin/agentd'), 'old');
    const masked = await install();
    expect(masked.stdout).toContain(`left ${unit} -> /dev/null as it is: agentd.service is masked`);
    expect(masked.stdout).toContain('so it was not enabled, started or restarted');
    expect(masked.stdout).toContain(`installed ${root}/usr/local/bin/agentd`);
    expect(await readlink(unit)).toBe('/dev/null');
    expect(await sd.take()).toEqual(['daemon-reload']);
    expect(await present(path.join(root, WANTS_LINK))).toBe(false);
    // And stopped: it stays stopped on a rerun.
    await rm(path.join(work, 'active'));
    await install();
    expect(await sd.take()).toEqual(['daemon-reload']);
    expect(sd.active()).toBe(false);
    expect(await readlink(unit)).toBe('/dev/null');

    // Masked at runtime on a first install: the unit is installed, agentd neither enabled nor
    // started; once unmasked, a rerun finishes the first install.
    const fresh = path.join(work, 'fresh');
    await mkdir(path.dirname(path.join(fresh, RUNTIME_MASK)), { recursive: true });
    await symlink('/dev/null', path.join(fresh, RUNTIME_MASK));
    const sd2 = await fakeSystemctl(path.join(work, 'sd2'), fresh);
    const env2 = { ...envWith(sd2.bin), DESTDIR: fresh };
    const runtime = await run(path.join(dir, 'install.sh'), [], { env: env2 });
    expect(runtime.stdout).toContain(
      `left ${path.join(fresh, RUNTIME_MASK)} -> /dev/null as it is: agentd.service is masked at runtime`,
    );
    expect(runtime.stdout).toContain('(systemctl unmask --runtime agentd, then run install.sh again)');
    // A unit file in /etc/systemd/system would override the runtime mask: none is installed.
    expect(await present(path.join(fresh, TARBALL_UNIT))).toBe(false);
    expect(await sd2.take()).toEqual(['daemon-reload']);
    expect(await readFile(path.join(fresh, INSTALL_MARKER), 'utf8')).toBe('first\n');
    await rm(path.join(fresh, RUNTIME_MASK));
    await run(path.join(dir, 'install.sh'), [], { env: env2 });
    expect(await sd2.take()).toEqual(['daemon-reload', 'enable agentd.service', 'start agentd.service']);
  });

  it('install.sh neither replaces nor writes through a symlink it did not make', async () => {
    const { work, root, env } = await installRoot({ systemd: false });
    const install = () =>
      run(path.join(dir, 'install.sh'), [], { env }).catch((e: { code: number; stderr: string }) => e);
    const bin = path.join(root, 'usr/local/bin');
    const own = path.join(work, 'own-agentd');
    await mkdir(bin, { recursive: true });
    await writeFile(own, "the operator's agentd");
    await symlink(own, path.join(bin, 'agentd'));

    // The operator's agentd link: refused before anything changes.
    const refused = await install();
    expect(refused).toMatchObject({ code: 1 });
    expect((refused as { stderr: string }).stderr).toContain(
      `${bin}/agentd is a symlink to ${own}, which install.sh did not make: nothing changed`,
    );
    expect(await readlink(path.join(bin, 'agentd'))).toBe(own);
    expect(await readFile(own, 'utf8')).toBe("the operator's agentd");
    expect(await present(path.join(root, 'etc/systemd/system/agentd.service'))).toBe(false);
    expect(await present(path.join(root, INSTALL_MARKER))).toBe(false);

    // Installed, then the unit linked to the operator's own (systemctl link): refused too.
    await rm(path.join(bin, 'agentd'));
    await install();
    const unit = path.join(root, 'etc/systemd/system/agentd.service');
    const ownUnit = path.join(work, 'own-agentd.service');
    await writeFile(ownUnit, '[Service]\n');
    await rm(unit);
    await symlink(ownUnit, unit);
    const linked = await install();
    expect((linked as { stderr: string }).stderr).toContain(`${unit} is a symlink to ${ownUnit}`);
    expect(await readlink(unit)).toBe(ownUnit);
    expect(await readFile(ownUnit, 'utf8')).toBe('[Service]\n');

    // A leftover temporary file that is a link is replaced, not written through.
    await rm(unit);
    await symlink(own, path.join(bin, 'agentd.install-tmp'));
    await writeFile(path.join(bin, 'agentd'), 'old');
    await install();
    expect(await readFile(own, 'utf8')).toBe("the operator's agentd");
    // (Buffer.equals: the executable is too large for a readable diff.)
    expect((await readFile(path.join(bin, 'agentd'))).equals(await readFile(path.join(dir, 'agentd')))).toBe(
      true,
    );
  });

  it('install.sh without a running systemd enables agentd for the next boot, without starting it or asking systemctl', async () => {
    // No <root>/run/systemd/system: a chroot or an image build. The stand-in records any call.
    const { root, sd, env } = await installRoot({ systemd: false });
    const install = (): Promise<{ stdout: string }> => run(path.join(dir, 'install.sh'), [], { env });
    const unit = '/etc/systemd/system/agentd.service';

    const first = await install();
    expect(first.stdout).toContain(`installed ${path.join(root, WANTS_LINK)} -> ${unit}`);
    expect(first.stdout).toContain('installed and enabled, not started: it starts at the next boot');
    // The link `systemctl enable` makes for the installed unit's WantedBy=, to it as seen from
    // inside the root, and one that agentctl uninstall removes.
    const unitText = await readFile(path.join(root, unit), 'utf8');
    expect(unitText).toMatch(/^WantedBy=multi-user\.target$/m);
    expect(await readlink(path.join(root, WANTS_LINK))).toBe(unit);
    expect(unitPaths(createHostPaths(root))).toContain(path.join(root, WANTS_LINK));
    expect(await readFile(path.join(root, INSTALL_MARKER), 'utf8')).toBe('installed\n');
    expect(await sd.calls()).toEqual([]);
    expect(sd.active()).toBe(false);

    const second = await install();
    expect(second.stdout).not.toContain('installed /');
    expect(second.stdout).toContain('stays enabled, not started: it starts at the next boot');
    expect(await readlink(path.join(root, WANTS_LINK))).toBe(unit);

    // A link that points elsewhere (the .deb's unit, a removed package's) still enables agentd.
    await rm(path.join(root, WANTS_LINK));
    await symlink(UNIT_PATH, path.join(root, WANTS_LINK));
    expect((await install()).stdout).toContain('stays enabled');
    expect(await readlink(path.join(root, WANTS_LINK))).toBe(UNIT_PATH);

    // The link removed (`systemctl disable` in the image): an upgrade leaves agentd disabled.
    await rm(path.join(root, WANTS_LINK));
    await writeFile(path.join(root, 'usr/local/bin/agentd'), 'old');
    const disabled = await install();
    expect(disabled.stdout).toContain('agentd.service stays disabled, as it was');
    expect(await present(path.join(root, WANTS_LINK))).toBe(false);

    // Masked (`systemctl mask` in the image): the link to /dev/null stays, agentd is not enabled.
    await rm(path.join(root, unit));
    await symlink('/dev/null', path.join(root, unit));
    const masked = await install();
    expect(masked.stdout).toContain('so it was not enabled and does not start at the next boot');
    expect(await readlink(path.join(root, unit))).toBe('/dev/null');
    expect(await present(path.join(root, WANTS_LINK))).toBe(false);
    expect(await sd.calls()).toEqual([]);
  });

  it('install.sh --uninstall hands over to agentctl uninstall on the systemd host, then removes its files', async () => {
    const work = await makeTempDir('agentd-install-');
    const root = path.join(work, 'root');
    const sd = await fakeSystemctl(work);
    const env = { ...envWith(sd.bin), DESTDIR: root };
    await run(path.join(dir, 'install.sh'), [], { env });
    const bin = path.join(root, 'usr/local/bin');
    // The installed agentctl, replaced by one that records its arguments and exits with the code
    // in `exit-code` (the real one would act on this machine's systemd).
    const recorded = path.join(work, 'agentctl-args');
    const installAgentctl = async (): Promise<void> => {
      await rm(path.join(bin, 'agentctl'), { force: true });
      await writeFile(
        path.join(bin, 'agentctl'),
        `#!/bin/sh\necho "$*" >> ${recorded}\nexit $(cat ${path.join(work, 'exit-code')} 2>/dev/null || echo 0)\n`,
        { mode: 0o755 },
      );
    };
    const uninstall = (args: string[]) =>
      run(path.join(dir, 'install.sh'), ['--uninstall', ...args], { env });
    const calls = async (): Promise<string[]> => (await readFile(recorded, 'utf8')).trim().split('\n');

    // A failed uninstall (here exit 3: agentctl could not stop the daemon) leaves every file.
    await installAgentctl();
    await writeFile(path.join(work, 'exit-code'), '3');
    const failed = await uninstall(['--yes']).catch((e: { code: number; stderr: string }) => e);
    expect(failed).toMatchObject({ code: 1 });
    expect((failed as { stderr: string }).stderr).toContain('agentctl uninstall failed (exit 3)');
    await readFile(path.join(bin, 'agentd'));
    const marker = path.join(root, INSTALL_MARKER);
    expect(await readFile(marker, 'utf8')).toBe('installed\n');
    // The rerun names the host too: with the daemon stopped, nothing else can say which it is.
    await writeFile(path.join(work, 'exit-code'), '0');
    const done = await uninstall(['--yes', '--keep-config']);
    expect(await calls()).toEqual([
      `uninstall --root ${root} --host systemd --yes`,
      `uninstall --root ${root} --host systemd --yes --keep-config`,
    ]);
    for (const f of ['agentd', 'agentctl']) {
      expect(done.stdout).toContain(`removed ${path.join(bin, f)}`);
      await expect(readFile(path.join(bin, f))).rejects.toThrow();
    }
    await expect(readFile(path.join(root, 'usr/local/share/man/man8/agentd.8'))).rejects.toThrow();
    // The record of the install too (agentctl uninstall, given another --state-dir, or this
    // stand-in, leaves it), and the state directory it alone was in: the next install is a first.
    expect(done.stdout).toContain(`removed ${marker}`);
    expect(await present(marker)).toBe(false);
    expect(await present(path.dirname(marker))).toBe(false);

    // The operator's own --host is passed as given, not overridden.
    await run(path.join(dir, 'install.sh'), [], { env });
    await installAgentctl();
    await uninstall(['--host=sim', '--yes']);
    expect((await calls()).at(-1)).toBe(`uninstall --root ${root} --host=sim --yes`);
  });

  it('install.sh refuses unknown arguments with exit 2, changing nothing', async () => {
    const work = await makeTempDir('agentd-install-');
    const err = await run(path.join(dir, 'install.sh'), ['--bogus'], {
      env: { ...process.env, DESTDIR: work },
    }).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 2 });
    expect((err as { stderr: string }).stderr).toContain('unknown argument: --bogus');
    await expect(readFile(path.join(work, 'usr/local/bin/agentd'))).rejects.toThrow();
  });

  it('the .deb installs in /usr/bin with a unit that starts it there', async () => {
    const { stdout } = await run('dpkg-deb', ['-c', r.deb]);
    expect(stdout).toMatch(/ \.\/usr\/bin\/agentd\n/);
    expect(stdout).toMatch(/ \.\/usr\/bin\/agentctl -> agentd/);
    expect(stdout).toContain('./usr/lib/systemd/system/agentd.service');
    expect(stdout).toContain('./usr/share/man/man8/agentd.8.gz');
    const info = await run('dpkg-deb', ['-f', r.deb, 'Package', 'Version', 'Architecture']);
    expect(info.stdout).toBe(`Package: agentd\nVersion: ${r.version}\nArchitecture: amd64\n`);
  });

  /** A temp root for dpkg (`--root`), with systemd running there or not. */
  async function dpkgRoot(o: { systemd: boolean }) {
    const work = await makeTempDir('agentd-dpkg-');
    const root = path.join(work, 'root');
    for (const d of [
      'var/lib/dpkg/info',
      'var/lib/dpkg/updates',
      ...(o.systemd ? ['run/systemd/system'] : []),
    ]) {
      await mkdir(path.join(root, d), { recursive: true });
    }
    await writeFile(path.join(root, 'var/lib/dpkg/status'), '');
    const sd = await fakeSystemctl(work, root);
    const env = envWith(sd.bin);
    // Scripts run without chroot (DPKG_ROOT tells them, and deb-systemd-helper, the root); the
    // temp root has no systemd packages to satisfy Depends.
    const dpkg = (...args: string[]) =>
      run(
        'dpkg',
        [`--root=${root}`, '--force-script-chrootless', '--force-depends', '--force-not-root', ...args],
        {
          env,
        },
      );
    const enabled = (): Promise<boolean> =>
      readlink(path.join(root, WANTS_LINK)).then(
        (target) => target === UNIT_PATH,
        () => false,
      );
    return { root, sd, env, dpkg, enabled };
  }

  it.skipIf(!debHelpers && !required)(
    'the .deb installs, upgrades, removes and purges cleanly with the real dpkg',
    async () => {
      const { root, sd, dpkg, enabled } = await dpkgRoot({ systemd: true });

      await dpkg('-i', r.deb);
      const unit = await readFile(path.join(root, 'usr/lib/systemd/system/agentd.service'), 'utf8');
      expect(unit).toContain('ExecStart=/usr/bin/agentd\n');
      expect((await run(path.join(root, 'usr/bin/agentd'), ['--version'], { env: {} })).stdout.trim()).toBe(
        r.version,
      );
      expect(await enabled()).toBe(true);
      expect(sd.active()).toBe(true);
      expect(await sd.take()).toEqual(['daemon-reload', 'start agentd.service']);

      await dpkg('-i', r.deb); // an upgrade (to the same version): restarted on the new executable
      expect(await sd.take()).toEqual(['daemon-reload', 'restart agentd.service']);

      await mkdir(path.join(root, 'var/lib/agentd/cache'), { recursive: true });
      await mkdir(path.join(root, 'etc/agentd'), { recursive: true });
      await writeFile(path.join(root, 'etc/agentd/config.yaml'), 'logLevel: debug\n');
      await mkdir(path.join(root, 'var/lib/machines/kube1'), { recursive: true });
      const removed = await dpkg('-r', 'agentd');
      expect(await sd.take()).toEqual(['stop agentd.service', 'daemon-reload']);
      expect(sd.active()).toBe(false);
      // The machines stay, and the operator is told how to take them down (no agentctl is left).
      expect(removed.stderr).toContain('the machines kube1 stay and the node keeps serving');
      await stat(path.join(root, 'var/lib/machines/kube1'));
      await expect(readFile(path.join(root, 'usr/bin/agentd'))).rejects.toThrow();
      // remove keeps state, configuration and the enable state (the unit masked meanwhile).
      expect(await readFile(path.join(root, 'etc/agentd/config.yaml'), 'utf8')).toBe('logLevel: debug\n');
      expect(await enabled()).toBe(true);
      expect(await readlink(path.join(root, 'etc/systemd/system/agentd.service'))).toBe('/dev/null');

      await dpkg('-P', 'agentd');
      await expect(readFile(path.join(root, 'etc/agentd/config.yaml'))).rejects.toThrow();
      await expect(run('test', ['-e', path.join(root, 'var/lib/agentd')])).rejects.toThrow();
      for (const left of [
        WANTS_LINK,
        'etc/systemd/system/agentd.service',
        'var/lib/systemd/deb-systemd-helper-enabled',
      ]) {
        expect(existsSync(path.join(root, left)), left).toBe(false);
      }
      const status = await run('dpkg-query', [
        `--root=${root}`,
        '-W',
        '-f',
        '${db:Status-Status}',
        'agentd',
      ]).catch((e: { stdout: string }) => e);
      expect(status.stdout).not.toBe('installed');
    },
  );

  it.skipIf(!debHelpers && !required)(
    "the .deb keeps the operator's choice across dpkg -r and a new install: enabled comes back enabled and running, disabled stays disabled",
    async () => {
      const { root, sd, env, dpkg, enabled } = await dpkgRoot({ systemd: true });
      await dpkg('-i', r.deb);
      await dpkg('-r', 'agentd');
      expect(sd.active()).toBe(false);
      await sd.take();

      // Installed again (dpkg calls it an upgrade from the removed version): enabled, started, unmasked.
      await dpkg('-i', r.deb);
      expect(await enabled()).toBe(true);
      expect(sd.active()).toBe(true);
      expect(await sd.take()).toEqual(['daemon-reload', 'restart agentd.service']);
      expect(existsSync(path.join(root, 'etc/systemd/system/agentd.service'))).toBe(false);

      // Disabled by the operator: neither an upgrade nor a removal and a new install enable it.
      await run('systemctl', ['disable', '--now', 'agentd.service'], { env });
      await sd.take();
      await dpkg('-i', r.deb);
      expect(await enabled()).toBe(false);
      expect(sd.active()).toBe(false);
      expect(await sd.take()).toEqual(['daemon-reload']);
      await dpkg('-r', 'agentd');
      await dpkg('-i', r.deb);
      expect(await enabled()).toBe(false);
      expect(sd.active()).toBe(false);
      expect(await sd.take()).toEqual(['stop agentd.service', 'daemon-reload', 'daemon-reload']);

      // A purge forgets the choice: the next install is a first one, and enables agentd.
      await dpkg('-P', 'agentd');
      await dpkg('-i', r.deb);
      expect(await enabled()).toBe(true);
      expect(sd.active()).toBe(true);
      await dpkg('-P', 'agentd');
      expect(await enabled()).toBe(false);
    },
  );

  it.skipIf(!debHelpers && !required)(
    'the .deb where systemd is not running (a chroot, an image build): enabled for the next boot, not started, and says so',
    async () => {
      const { sd, dpkg, enabled } = await dpkgRoot({ systemd: false });
      const installed = await dpkg('-i', r.deb);
      expect(await enabled()).toBe(true);
      expect(installed.stderr).toContain('systemd is not running here');
      expect(installed.stderr).toContain('agentd.service is enabled and starts at the next boot');
      expect(await sd.calls()).toEqual([]);
      await dpkg('-P', 'agentd');
      expect(await enabled()).toBe(false);
      expect(await sd.calls()).toEqual([]);
    },
  );

  it.skipIf(!debHelpers && !required)(
    "the .deb's postinst brings agentd back after a failed removal or upgrade (abort-remove, abort-upgrade)",
    async () => {
      const { root, sd, env, dpkg } = await dpkgRoot({ systemd: true });
      await dpkg('-i', r.deb);
      await sd.take();
      // As dpkg runs it: the package's postinst, with what dpkg tells its scripts.
      const postinst = (...args: string[]) =>
        run(path.join(root, 'var/lib/dpkg/info/agentd.postinst'), args, {
          env: {
            ...env,
            DPKG_ROOT: root,
            DPKG_MAINTSCRIPT_PACKAGE: 'agentd',
            DPKG_MAINTSCRIPT_NAME: 'postinst',
          },
        });
      // prerm remove stopped agentd, then failed: dpkg calls postinst abort-remove.
      await run('systemctl', ['stop', 'agentd.service'], { env });
      await sd.take();
      await postinst('abort-remove');
      expect(await sd.take()).toEqual(['daemon-reload', 'start agentd.service']);
      expect(sd.active()).toBe(true);
      // The new version's preinst failed: the old postinst gets abort-upgrade and the new version.
      await postinst('abort-upgrade', `${r.version}+1`);
      expect(await sd.take()).toEqual(['daemon-reload', 'restart agentd.service']);
      expect(sd.active()).toBe(true);
      await dpkg('-P', 'agentd');
    },
  );
});
