/**
 * "Is the wanted version already installed?": run the installed binary with `--version` and
 * match its output the way the real binaries print it, so a rootfs that already has the right
 * binaries (from the OCI image, or an earlier run) is not downloaded into again.
 */
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { ensureSpawnHeadroom } from '../../host/spawn-headroom.js';
import type { ArtifactSpec, VersionOutputFormat, VersionProbe } from './types.js';

/** How long the default probe lets a binary take to print its version. */
export const VERSION_PROBE_TIMEOUT_MS = 5_000;

/** Production probe: `<binary> --version` with execa (5 s timeout); any failure → null, but for no descriptors (EMFILE, thrown). */
export const defaultVersionProbe: VersionProbe = async (binaryPath) => {
  // Without descriptors a spawn ends agentd (src/host/spawn-headroom.ts): this throws EMFILE
  // instead, outside the try, since a shortage of agentd's is not a binary that is missing.
  ensureSpawnHeadroom(`${binaryPath} --version`);
  try {
    await access(binaryPath, constants.X_OK);
    const result = await execa(binaryPath, ['--version'], {
      timeout: VERSION_PROBE_TIMEOUT_MS,
      reject: false,
      stdin: 'ignore',
      env: { LC_ALL: 'C' },
    });
    if (result.exitCode !== 0) return null;
    const out = `${String(result.stdout)}\n${String(result.stderr)}`.trim();
    return out === '' ? null : out;
  } catch {
    return null;
  }
};

/** True when `output` of `<binary> --version` reports `version` (without a leading v). */
export function versionOutputMatches(format: VersionOutputFormat, output: string, version: string): boolean {
  const text = output.trim();
  const tokens = text.split(/\s+/);
  switch (format) {
    case 'kubernetes':
      // `Kubernetes v1.34.0`
      return tokens.length === 2 && tokens[0] === 'Kubernetes' && tokens[1] === `v${version}`;
    case 'crictl':
      // `crictl version v1.34.0`
      return tokens.length === 3 && tokens[0] === 'crictl' && tokens[2] === `v${version}`;
    case 'runc': {
      // first line `runc version 1.1.12`
      const first = (text.split('\n')[0] ?? '').trim().split(/\s+/);
      return first[0] === 'runc' && first[1] === 'version' && first[2]?.replace(/^v/, '') === version;
    }
    case 'containerd':
    case 'cni':
      // `containerd github.com/containerd/containerd/v2 v2.0.4 <sha>`, `CNI bridge plugin v1.5.1`
      return tokens.includes(`v${version}`) || tokens.includes(version);
  }
}

/** True when `spec` is already installed in `rootfsDir` at its version. */
export async function isInstalled(
  spec: ArtifactSpec,
  rootfsDir: string,
  probe: VersionProbe,
): Promise<boolean> {
  const check = spec.versionCheck;
  for (const rel of check.requires) {
    const st = await stat(path.join(rootfsDir, rel)).catch(() => null);
    if (!st?.isFile()) return false;
  }
  const output = await probe(path.join(rootfsDir, check.probe));
  return output !== null && versionOutputMatches(check.format, output, spec.version);
}
