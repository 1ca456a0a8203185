/**
 * agentd as an operator installs it (docs/operations.md, "Install"): the package built by
 * `npm pack`, installed with its locked production dependencies under
 * `/usr/local/lib/node_modules/agentd`, `agentd` and `agentctl` linked into `/usr/local/bin`,
 * the unit from `systemd/` copied unchanged to `/etc/systemd/system/`, and a config file in
 * `/etc/agentd/config.yaml`. Node.js itself comes read-only from this machine (same glibc).
 *
 * The package is built and its dependencies installed once per test process, offline from
 * npm's cache (which `npm ci` filled), then bound read-only into every host.
 */
import { chmod, copyFile, mkdir, mkdtemp, readdir, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runOk } from './run.js';

export const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const PACKAGE_IN_HOST = '/usr/local/lib/node_modules/agentd';

let staging: Promise<string> | undefined;

/** The installed package tree (built once per process): `<dir>/package`. */
export function stagePackage(): Promise<string> {
  return (staging ??= (async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-real-host-pkg-'));
    // `dist/` is built by `npm test` / `npm run test:host` before vitest runs.
    await runOk('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', dir], {
      cwd: REPO,
      timeoutMs: 120_000,
    });
    const tgz = (await readdir(dir)).find((f) => f.endsWith('.tgz'));
    if (!tgz) throw new Error(`npm pack wrote no tarball into ${dir}`);
    await runOk('tar', ['-xzf', path.join(dir, tgz), '-C', dir]);
    const pkg = path.join(dir, 'package');
    await copyFile(path.join(REPO, 'package-lock.json'), path.join(pkg, 'package-lock.json'));
    await runOk(
      'npm',
      ['ci', '--omit=dev', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '--silent'],
      { cwd: pkg, timeoutMs: 300_000 },
    );
    // npm makes a package's `bin` targets executable when it installs them; so do we.
    for (const bin of ['dist/bin/agentd.js', 'dist/bin/agentctl.js']) await chmod(path.join(pkg, bin), 0o755);
    return pkg;
  })().catch((err: unknown) => {
    staging = undefined;
    throw err;
  }));
}

/** systemd-nspawn arguments that make the staged package and Node.js visible in the host. */
export async function installBinds(): Promise<string[]> {
  const pkg = await stagePackage();
  return ['--bind-ro=/usr/bin/node', `--bind-ro=${pkg}:${PACKAGE_IN_HOST}`];
}

/** Lay agentd's files into a host rootfs before it boots. `configYaml` is /etc/agentd/config.yaml. */
export async function installAgentd(rootfs: string, configYaml: string): Promise<void> {
  await mkdir(path.join(rootfs, PACKAGE_IN_HOST.slice(1)), { recursive: true });
  const bin = path.join(rootfs, 'usr/local/bin');
  await mkdir(bin, { recursive: true });
  await symlink(`../lib/node_modules/agentd/dist/bin/agentd.js`, path.join(bin, 'agentd'));
  await symlink(`../lib/node_modules/agentd/dist/bin/agentctl.js`, path.join(bin, 'agentctl'));
  await copyFile(
    path.join(REPO, 'systemd/agentd.service'),
    path.join(rootfs, 'etc/systemd/system/agentd.service'),
  );
  await mkdir(path.join(rootfs, 'etc/agentd'), { recursive: true });
  await writeFile(path.join(rootfs, 'etc/agentd/config.yaml'), configYaml);
}
