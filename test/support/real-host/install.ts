/**
 * agentd installed in a real host the way docs/operations.md tells an operator to: from the
 * release artifacts (`npm run release`, built once per set of inputs by `ensureRelease`), with
 * nothing else — no Node.js, no npm, no network. Either the tarball, unpacked and its
 * `install.sh` run (agentd in /usr/local/bin, the unit in /etc/systemd/system, enabled and
 * started), or the `.deb` through dpkg (agentd in /usr/bin, the unit in /usr/lib/systemd/system).
 * The daemon config goes to /etc/agentd/config.yaml before, as an operator would write it.
 */
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureRelease } from '../release.js';
import type { RealHost } from './host.js';

export const REPO = fileURLToPath(new URL('../../../', import.meta.url));

export type InstallKind = 'tarball' | 'deb';

/** Put the release artifact and the daemon config into a host rootfs before it boots. */
export async function stageInstall(rootfs: string, kind: InstallKind, configYaml: string): Promise<string> {
  const r = await ensureRelease();
  const artifact = kind === 'deb' ? r.deb : r.tarball;
  const inHost = path.join('/root', path.basename(artifact));
  await copyFile(artifact, path.join(rootfs, inHost));
  await mkdir(path.join(rootfs, 'etc/agentd'), { recursive: true });
  await writeFile(path.join(rootfs, 'etc/agentd/config.yaml'), configYaml);
  return inHost;
}

/** Install (and so start) agentd in the booted host from the staged artifact. */
export async function installAgentd(host: RealHost, kind: InstallKind, artifact: string): Promise<void> {
  if (kind === 'deb') {
    await host.execOk(['dpkg', '-i', artifact], { timeoutMs: 300_000 });
    return;
  }
  await host.execOk(['tar', '-xzf', artifact, '-C', '/root']);
  const dir = artifact.replace(/\.tar\.gz$/, '');
  await host.execOk([path.join(dir, 'install.sh')], { timeoutMs: 300_000 });
}
