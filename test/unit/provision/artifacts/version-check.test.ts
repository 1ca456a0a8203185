import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../../../src/config/agent-config.js';
import { resolveArtifacts } from '../../../../src/provision/artifacts/resolve.js';
import {
  defaultVersionProbe,
  isInstalled,
  versionOutputMatches,
} from '../../../../src/provision/artifacts/version-check.js';
import { makeAgentConfig } from '../../../support/agent-config.js';
import { tempDirs } from './helpers.js';

const dirs = tempDirs();
afterEach(() => dirs.cleanup());

describe('versionOutputMatches', () => {
  it('matches the real output formats and nothing near them', () => {
    expect(versionOutputMatches('kubernetes', 'Kubernetes v1.34.0\n', '1.34.0')).toBe(true);
    expect(versionOutputMatches('kubernetes', 'Kubernetes v1.34.01', '1.34.0')).toBe(false);
    expect(versionOutputMatches('kubernetes', 'Kubernetes v1.33.0', '1.34.0')).toBe(false);
    expect(versionOutputMatches('crictl', 'crictl version v1.34.0', '1.34.0')).toBe(true);
    expect(versionOutputMatches('crictl', 'crictl version v1.33.0', '1.34.0')).toBe(false);
    expect(
      versionOutputMatches(
        'containerd',
        'containerd github.com/containerd/containerd/v2 v2.0.4 abcdef',
        '2.0.4',
      ),
    ).toBe(true);
    expect(
      versionOutputMatches(
        'containerd',
        'containerd github.com/containerd/containerd/v2 v2.0.41 abcdef',
        '2.0.4',
      ),
    ).toBe(false);
    expect(
      versionOutputMatches('runc', 'runc version 1.1.12\ncommit: v1.1.12-0-gabc\nspec: 1.0.2', '1.1.12'),
    ).toBe(true);
    expect(versionOutputMatches('runc', 'runc version 1.1.13\ncommit: v1.1.12', '1.1.12')).toBe(false);
    expect(
      versionOutputMatches(
        'cni',
        'CNI bridge plugin v1.5.1\nCNI protocol versions supported: 1.0.0',
        '1.5.1',
      ),
    ).toBe(true);
    expect(versionOutputMatches('cni', 'CNI bridge plugin v1.5.0', '1.5.1')).toBe(false);
  });
});

async function script(file: string, body: string, mode = 0o755): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, mode);
}

describe('defaultVersionProbe', () => {
  it('returns the output of `<binary> --version`', async () => {
    const dir = await dirs.make();
    await script(path.join(dir, 'kubelet'), '[ "$1" = --version ] && echo "Kubernetes v1.34.0"');
    expect(await defaultVersionProbe(path.join(dir, 'kubelet'))).toBe('Kubernetes v1.34.0');
  });

  it('returns null for a missing, non-executable or failing binary', async () => {
    const dir = await dirs.make();
    expect(await defaultVersionProbe(path.join(dir, 'absent'))).toBeNull();
    await script(path.join(dir, 'noexec'), 'echo hi', 0o644);
    expect(await defaultVersionProbe(path.join(dir, 'noexec'))).toBeNull();
    await script(path.join(dir, 'fails'), 'echo "Kubernetes v1.34.0"; exit 3');
    expect(await defaultVersionProbe(path.join(dir, 'fails'))).toBeNull();
  });
});

describe('isInstalled', () => {
  const specs = resolveArtifacts(agentConfigSchema.parse(makeAgentConfig()), 'amd64');
  const kubectl = specs.find((s) => s.name === 'kubectl')!;

  it('needs every required file and a matching probe', async () => {
    const rootfs = await dirs.make();
    const probed: string[] = [];
    const probe = async (bin: string): Promise<string> => {
      probed.push(path.relative(rootfs, bin));
      return 'Kubernetes v1.34.0';
    };
    expect(await isInstalled(kubectl, rootfs, probe)).toBe(false);
    expect(probed).toEqual([]);
    await script(path.join(rootfs, 'usr/local/bin/kubectl'), 'exit 0');
    expect(await isInstalled(kubectl, rootfs, probe)).toBe(true);
    expect(probed).toEqual(['usr/local/bin/kubelet']);
    expect(await isInstalled(kubectl, rootfs, async () => 'Kubernetes v1.33.0')).toBe(false);
    expect(await isInstalled(kubectl, rootfs, async () => null)).toBe(false);
  });
});
