import { lstat, mkdir, readFile, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentConfigSchema, type AgentConfig } from '../../../../src/config/agent-config.js';
import { writeOsFiles } from '../../../../src/provision/files/os-files.js';
import { ROOTFS_FILES } from '../../../../src/provision/files/rootfs-layout.js';
import {
  renderStagingFiles,
  stagedFileList,
  writeStagingFiles,
} from '../../../../src/provision/files/staging-files.js';
import { makeAgentConfig, TEST_BOOTSTRAP_TOKEN } from '../../../support/agent-config.js';
import { useTempDirs } from './tmp-dir.js';

const HOST = { hostname: 'node-a', resolvConf: 'nameserver 10.1.0.2\n', devices: [] };

interface Entry {
  path: string;
  kind: 'file' | 'symlink';
  mode?: number;
  target?: string;
}

/** Every file and symlink under `root`, relative, sorted. */
async function walk(root: string, dir = ''): Promise<Entry[]> {
  const out: Entry[] = [];
  for (const name of await readdir(path.join(root, dir))) {
    const rel = dir ? `${dir}/${name}` : name;
    const st = await lstat(path.join(root, rel));
    if (st.isDirectory()) out.push(...(await walk(root, rel)));
    else if (st.isSymbolicLink())
      out.push({ path: rel, kind: 'symlink', target: await readlink(path.join(root, rel)) });
    else out.push({ path: rel, kind: 'file', mode: st.mode & 0o777 });
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : 1));
}

function parse(overrides: Parameters<typeof makeAgentConfig>[0] = {}): AgentConfig {
  return agentConfigSchema.parse(makeAgentConfig(overrides));
}

describe('writeStagingFiles', () => {
  const tempDir = useTempDirs();

  it('writes exactly the files stagedFileList announces, with those modes', async () => {
    const rootfs = await tempDir();
    const config = parse();
    await writeOsFiles(rootfs, HOST);
    await writeStagingFiles(rootfs, config);
    const announced = stagedFileList(config)
      .map(({ path: p, kind, mode, target }) =>
        kind === 'symlink' ? { path: p, kind, target } : { path: p, kind, mode },
      )
      .sort((a, b) => (a.path < b.path ? -1 : 1));
    expect(await walk(rootfs)).toEqual(announced);
  });

  it('makes the bootstrap kubeconfig 0600 and marks it secret, and only it', async () => {
    const rootfs = await tempDir();
    await writeStagingFiles(rootfs, parse());
    const kubeconfig = path.join(rootfs, 'var/lib/kubelet/bootstrap-kubeconfig');
    expect((await lstat(kubeconfig)).mode & 0o777).toBe(0o600);
    const secrets = stagedFileList(parse()).filter((f) => f.secret);
    expect(secrets.map((f) => f.path)).toEqual([ROOTFS_FILES.bootstrapKubeconfig]);
  });

  it('puts the bootstrap token in the kubeconfig and nowhere else in the rootfs', async () => {
    const rootfs = await tempDir();
    await writeOsFiles(rootfs, HOST);
    await writeStagingFiles(rootfs, parse());
    const holders: string[] = [];
    for (const entry of await walk(rootfs)) {
      if (entry.kind !== 'file') continue;
      const text = await readFile(path.join(rootfs, entry.path), 'utf8');
      // The secret half alone must not leak either.
      if (text.includes(TEST_BOOTSTRAP_TOKEN.split('.')[1]!)) holders.push(entry.path);
    }
    expect(holders).toEqual([ROOTFS_FILES.bootstrapKubeconfig]);
  });

  it('writes the version line of 10-agentd.conf into the rootfs', async () => {
    const rootfs = await tempDir();
    const base = makeAgentConfig();
    await writeStagingFiles(rootfs, parse({ Cluster: { ...base.Cluster, Version: 'v1.35.0' } }));
    const text = await readFile(
      path.join(rootfs, 'etc/systemd/system/kubelet.service.d/10-agentd.conf'),
      'utf8',
    );
    expect(text.split('\n')).toContain('Environment=AGENTD_KUBERNETES_VERSION=1.35.0');
  });

  it('writes nothing when a value is refused', async () => {
    const rootfs = await tempDir();
    const bad = structuredClone(parse());
    bad.Kubelet.Labels = { a: 'b c' };
    await expect(writeStagingFiles(rootfs, bad)).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    expect(await readdir(rootfs)).toEqual([]);
  });

  it("makes the static pods' directory 0700, empty, and keeps it 0700 when it exists", async () => {
    const rootfs = await tempDir();
    await mkdir(path.join(rootfs, 'etc/kubernetes/manifests'), { recursive: true, mode: 0o755 });
    await writeStagingFiles(rootfs, parse());
    const dir = path.join(rootfs, 'etc/kubernetes/manifests');
    expect((await lstat(dir)).mode & 0o777).toBe(0o700);
    expect(await readdir(dir)).toEqual([]);
  });

  it("writes kubelet's kubeconfig itself with an exec credential, and no bootstrap kubeconfig", async () => {
    const rootfs = await tempDir();
    const exec = parse({
      Kubelet: { ...makeAgentConfig().Kubelet, Auth: { ExecCredential: { command: 'tok' } } },
    });
    await writeStagingFiles(rootfs, exec);
    const kubeconfig = path.join(rootfs, 'var/lib/kubelet/kubeconfig');
    expect((await lstat(kubeconfig)).mode & 0o777).toBe(0o600);
    expect(await readFile(kubeconfig, 'utf8')).toContain('command: tok');
    await expect(lstat(path.join(rootfs, 'var/lib/kubelet/bootstrap-kubeconfig'))).rejects.toThrow(/ENOENT/);
    // The same file in every machine: the node keeps its identity through a repave.
    const again = await tempDir();
    await writeStagingFiles(again, exec);
    expect(await readFile(path.join(again, 'var/lib/kubelet/kubeconfig'), 'utf8')).toBe(
      await readFile(kubeconfig, 'utf8'),
    );
  });

  it('lists the kubeconfig each auth form writes and renders no content into the list', () => {
    const token = stagedFileList(parse());
    const exec = stagedFileList(
      parse({
        Kubelet: { ...makeAgentConfig().Kubelet, Auth: { ExecCredential: { command: 'tok' } } },
      }),
    );
    expect(exec.map((f) => f.path)).toEqual(
      token.map((f) => (f.path === ROOTFS_FILES.bootstrapKubeconfig ? ROOTFS_FILES.kubeconfig : f.path)),
    );
    expect(JSON.stringify(token)).not.toContain(TEST_BOOTSTRAP_TOKEN);
    expect(renderStagingFiles(parse()).map((e) => e.path)).toEqual(
      token.filter((f) => f.phase === 'stage').map((f) => f.path),
    );
  });
});
