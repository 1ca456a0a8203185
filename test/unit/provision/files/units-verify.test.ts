/**
 * `systemd-analyze verify` over the generated units, in a temp root that holds them, stand-in
 * binaries and a copy of the host's own unit directory (for the targets they depend on).
 * Skips when the tool or the unit directory is missing, unless AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { execFile } from 'node:child_process';
import { access, cp, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../../../src/config/agent-config.js';
import { createHostPaths } from '../../../../src/host/paths.js';
import { writeNspawnFiles } from '../../../../src/provision/files/nspawn-files.js';
import { writeOsFiles } from '../../../../src/provision/files/os-files.js';
import { writeStagingFiles } from '../../../../src/provision/files/staging-files.js';
import { writeRootfsEntries } from '../../../../src/provision/files/rootfs-entry.js';
import { renderGpuFiles } from '../../../../src/provision/gpu/gpu-files.js';
import { makeAgentConfig } from '../../../support/agent-config.js';
import { useTempDirs } from './tmp-dir.js';

const run = promisify(execFile);
const HOST_UNIT_DIRS = ['/usr/lib/systemd/system', '/lib/systemd/system'];

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

async function findTool(): Promise<{ analyze: string; unitDir: string } | undefined> {
  const analyze = (
    await run('sh', ['-c', 'command -v systemd-analyze']).catch(() => ({ stdout: '' }))
  ).stdout.trim();
  let unitDir: string | undefined;
  for (const dir of HOST_UNIT_DIRS) {
    if (await exists(path.join(dir, 'systemd-nspawn@.service'))) {
      unitDir = dir;
      break;
    }
  }
  return analyze && unitDir ? { analyze, unitDir } : undefined;
}

const tool = await findTool();
const SYSTEMD_VERSION = tool
  ? Number(/systemd (\d+)/.exec((await run(tool.analyze, ['--version'])).stdout)?.[1] ?? 0)
  : 0;
const required = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';

describe.skipIf(!tool && !required)('generated units pass systemd-analyze verify', () => {
  const tempDir = useTempDirs();

  it('has systemd-analyze and the host unit directory', () => {
    expect(tool, 'systemd-analyze and a unit directory with systemd-nspawn@.service').toBeDefined();
  });

  it('accepts containerd.service, kubelet.service with its drop-ins, and the nspawn drop-in', async () => {
    const { analyze, unitDir } = tool!;
    const root = await tempDir();
    const config = agentConfigSchema.parse(
      makeAgentConfig({
        Kubelet: {
          ...makeAgentConfig().Kubelet,
          Labels: { 'b.example.com/x': 'y', a: 'b' },
          RegisterWithTaints: ['dedicated=gpu:NoSchedule'],
        },
      }),
    );
    // One root stands for both the host (nspawn drop-in) and the machine (its units).
    await writeOsFiles(root, {
      hostname: 'node-a',
      resolvConf: 'nameserver 10.1.0.2\n',
      devices: ['/dev/kvm'],
    });
    await writeStagingFiles(root, config);
    await writeNspawnFiles(createHostPaths(root), 'kube1', {
      hostname: 'node-a',
      resolvConf: '',
      devices: ['/dev/kvm'],
    });
    // A GPU host's machine: the setup unit and containerd's drop-in that requires it.
    await writeRootfsEntries(
      root,
      renderGpuFiles({
        devices: ['/dev/nvidia0'],
        libraryDirs: ['/usr/lib/x86_64-linux-gnu'],
        libraries: [
          { name: 'libcuda.so.1', hostPath: '/usr/lib/x86_64-linux-gnu/libcuda.so.1', dirIndex: 0 },
        ],
        machineLibDir: '/usr/lib/x86_64-linux-gnu',
      }),
    );
    await cp(unitDir, path.join(root, 'usr/lib/systemd/system'), { recursive: true, verbatimSymlinks: true });
    for (const bin of [
      'usr/local/bin/kubelet',
      'usr/local/bin/containerd',
      'usr/bin/machinectl',
      'usr/bin/systemd-nspawn',
      'usr/bin/find',
      'usr/bin/ln',
      'usr/bin/mkdir',
      'usr/sbin/ldconfig',
      'usr/bin/nvidia-ctk',
    ]) {
      await mkdir(path.dirname(path.join(root, bin)), { recursive: true });
      await writeFile(path.join(root, bin), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    }
    const result = await run(
      analyze,
      [
        'verify',
        `--root=${root}`,
        'containerd.service',
        'kubelet.service',
        'agentd-nvidia-setup.service',
        'systemd-nspawn@kube1.service',
      ],
      { timeout: 20_000 },
    ).then(
      (r) => ({ code: 0, stderr: r.stderr }),
      (err: { code?: number; stderr?: string }) => ({
        code: err.code ?? -1,
        stderr: err.stderr ?? String(err),
      }),
    );
    // The restart backoff keys came with systemd 254 (the machine image has 255); an older
    // systemd-analyze names them unknown, and systemd itself ignores them.
    const backoffKey = /Unknown key '(RestartSteps|RestartMaxDelaySec)' in section \[Service\]/;
    const ours = result.stderr
      .split('\n')
      .filter((l) => /kubelet|containerd|nspawn|agentd|nvidia/.test(l))
      .filter((l) => !(SYSTEMD_VERSION < 254 && backoffKey.test(l)));
    expect(ours).toEqual([]);
    expect(result.code, result.stderr).toBe(0);
  });
});
