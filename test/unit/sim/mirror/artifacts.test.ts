import { createHash } from 'node:crypto';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { Parser, type ReadEntry } from 'tar';
import { afterEach, describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../../../src/config/agent-config.js';
import { stubScript } from '../../../../src/sim/mirror/artifact-content.js';
import { mirrorDownloads, type ArtifactHandlerOptions } from '../../../../src/sim/mirror/artifacts.js';
import { makeAgentConfig } from '../../../support/agent-config.js';
import { startMirror, tempDirs, type TestMirror } from '../../provision/artifacts/helpers.js';

const K8S = '/dl.k8s.io';
const GH = '/github.com';
const PATHS = {
  kubelet: `${K8S}/v1.34.0/bin/linux/amd64/kubelet`,
  crictl: `${GH}/kubernetes-sigs/cri-tools/releases/download/v1.34.0/crictl-v1.34.0-linux-amd64.tar.gz`,
  containerd: `${GH}/containerd/containerd/releases/download/v2.0.4/containerd-2.0.4-linux-amd64.tar.gz`,
  runc: `${GH}/opencontainers/runc/releases/download/v1.1.12/runc.amd64`,
  cni: `${GH}/containernetworking/plugins/releases/download/v1.5.1/cni-plugins-linux-amd64-v1.5.1.tgz`,
};

const dirs = tempDirs();
let mirror: TestMirror | undefined;

afterEach(async () => {
  await mirror?.close();
  mirror = undefined;
  await dirs.cleanup();
});

async function start(options: ArtifactHandlerOptions = {}): Promise<TestMirror> {
  mirror = await startMirror(options);
  return mirror;
}

async function get(
  p: string,
  init: RequestInit = {},
): Promise<{ status: number; body: Buffer; length: string | null }> {
  const res = await fetch(`${mirror!.baseUrl}${p}`, init);
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, body, length: res.headers.get('content-length') };
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function tarEntries(gz: Buffer): Promise<Map<string, { mode: number; data: string }>> {
  const entries = new Map<string, { mode: number; data: string }>();
  await new Promise<void>((resolve, reject) => {
    const parser = new Parser({ strict: true });
    parser.on('entry', (e: ReadEntry) => {
      let data = '';
      e.on('data', (c: Buffer) => (data += c.toString()));
      e.on('end', () => entries.set(e.path, { mode: e.mode ?? 0, data }));
    });
    parser.on('end', resolve);
    parser.on('error', reject);
    parser.end(gz);
  });
  return entries;
}

describe('artifact mirror: layouts and checksums', () => {
  it('serves every artifact with Content-Length and a checksum file that matches', async () => {
    await start();
    const kubelet = await get(PATHS.kubelet);
    expect(kubelet.status).toBe(200);
    expect(Number(kubelet.length)).toBe(kubelet.body.length);
    expect((await get(`${PATHS.kubelet}.sha256`)).body.toString()).toBe(sha(kubelet.body));

    const crictl = await get(PATHS.crictl);
    expect((await get(`${PATHS.crictl}.sha256`)).body.toString().trim()).toBe(sha(crictl.body));

    const containerd = await get(PATHS.containerd);
    expect((await get(`${PATHS.containerd}.sha256sum`)).body.toString()).toBe(
      `${sha(containerd.body)}  containerd-2.0.4-linux-amd64.tar.gz\n`,
    );

    const cni = await get(PATHS.cni);
    expect((await get(`${PATHS.cni}.sha256`)).body.toString()).toBe(
      `${sha(cni.body)}  cni-plugins-linux-amd64-v1.5.1.tgz\n`,
    );

    const runcAmd = await get(PATHS.runc);
    const runcArm = await get(PATHS.runc.replace('amd64', 'arm64'));
    expect(runcAmd.body.equals(runcArm.body)).toBe(false);
    const sums = (
      await get(`${GH}/opencontainers/runc/releases/download/v1.1.12/runc.sha256sum`)
    ).body.toString();
    expect(sums).toBe(`${sha(runcAmd.body)}  runc.amd64\n${sha(runcArm.body)}  runc.arm64\n`);
  });

  it('answers HEAD with the same Content-Length and no body', async () => {
    await start();
    const full = await get(PATHS.containerd);
    const head = await get(PATHS.containerd, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.length).toBe(String(full.body.length));
    expect(head.body.length).toBe(0);
  });

  it('is deterministic per (artifact, version, arch) and differs across them', async () => {
    await start();
    const a = await get(PATHS.containerd);
    const b = await get(PATHS.containerd);
    expect(a.body.equals(b.body)).toBe(true);
    const other = await get(PATHS.containerd.replaceAll('2.0.4', '2.0.5'));
    expect(other.status).toBe(200);
    expect(other.body.equals(a.body)).toBe(false);
  });

  it('serves any version, packed like upstream', async () => {
    await start();
    const containerd = await tarEntries((await get(PATHS.containerd.replaceAll('2.0.4', '1.7.3'))).body);
    expect([...containerd.keys()].filter((p) => !p.endsWith('/')).sort()).toEqual([
      'bin/containerd',
      'bin/containerd-shim-runc-v2',
      'bin/containerd-stress',
      'bin/ctr',
    ]);
    expect(containerd.get('bin/ctr')!.mode & 0o777).toBe(0o755);
    expect(containerd.get('bin/containerd')!.data).toContain(
      'containerd github.com/containerd/containerd v1.7.3 ',
    );
    const cni = await tarEntries((await get(PATHS.cni)).body);
    expect([...cni.keys()].filter((p) => p !== './').sort()).toEqual([
      './bridge',
      './host-local',
      './loopback',
      './portmap',
    ]);
    const crictl = await tarEntries((await get(PATHS.crictl)).body);
    expect([...crictl.keys()]).toEqual(['crictl']);
  });

  it('returns false (not handled) for other paths and mismatched versions', async () => {
    await start();
    for (const p of [
      '/v2/',
      `${K8S}/v1.34.0/bin/linux/amd64/etcd`,
      `${K8S}/v1.34.0/bin/linux/s390x/kubelet`,
      `${GH}/kubernetes-sigs/cri-tools/releases/download/v1.34.0/crictl-v1.33.0-linux-amd64.tar.gz`,
    ]) {
      expect((await get(p)).status).toBe(404);
    }
    expect(mirror!.requests).toEqual([]);
  });

  it('refuses other methods with 405', async () => {
    await start();
    expect((await get(PATHS.kubelet, { method: 'POST' })).status).toBe(405);
  });
});

describe('artifact mirror: missing versions', () => {
  it('major version 99 does not exist', async () => {
    await start();
    expect((await get(PATHS.kubelet.replace('1.34.0', '99.0.0'))).status).toBe(404);
    expect((await get(`${PATHS.kubelet.replace('1.34.0', '99.0.0')}.sha256`)).status).toBe(404);
    expect((await get(PATHS.containerd.replaceAll('2.0.4', '99.1.2'))).status).toBe(404);
    expect((await get(`${GH}/opencontainers/runc/releases/download/v99.0.0/runc.sha256sum`)).status).toBe(
      404,
    );
    expect(mirror!.requests).toHaveLength(4);
  });

  it('missingVersionPattern replaces the rule', async () => {
    await start({ missingVersionPattern: /^1\.34\./ });
    expect((await get(PATHS.kubelet)).status).toBe(404);
    expect((await get(PATHS.kubelet.replace('1.34.0', '99.0.0'))).status).toBe(200);
  });
});

describe('artifact mirror: executables', () => {
  it.each([
    ['kubelet', '1.34.0', 'Kubernetes v1.34.0'],
    ['kube-proxy', '1.34.0', 'Kubernetes v1.34.0'],
    ['crictl', '1.34.0', 'crictl version v1.34.0'],
    ['runc', '1.1.12', 'runc version 1.1.12'],
    ['bridge', '1.5.1', 'CNI bridge plugin v1.5.1'],
  ])('%s --version prints like the real one', async (name, version, first) => {
    const dir = await dirs.make('agentd-mirror-');
    const file = path.join(dir, name);
    await writeFile(file, stubScript(name, version, 'amd64'));
    await chmod(file, 0o755);
    const { stdout } = await execa(file, ['--version']);
    expect(stdout.split('\n')[0]).toBe(first);
  });

  it('containerd --version names module, version and a commit', async () => {
    const dir = await dirs.make('agentd-mirror-');
    const file = path.join(dir, 'containerd');
    await writeFile(file, stubScript('containerd', '2.0.4', 'amd64'));
    await chmod(file, 0o755);
    const { stdout } = await execa(file, ['--version']);
    expect(stdout).toMatch(/^containerd github\.com\/containerd\/containerd\/v2 v2\.0\.4 [0-9a-f]{40}$/);
  });
});

describe('artifact mirror: the containerd stand-in loads its configuration as containerd 2.x', () => {
  /** A stand-in containerd and a config dir: `config.toml` importing `conf.d/*.toml`. */
  async function standIn(dropIns: Record<string, string>): Promise<{ bin: string; config: string }> {
    const dir = await dirs.make('agentd-containerd-');
    const bin = path.join(dir, 'containerd');
    await writeFile(bin, stubScript('containerd', '2.0.4', 'amd64'));
    await chmod(bin, 0o755);
    await mkdir(path.join(dir, 'conf.d'));
    const config = path.join(dir, 'config.toml');
    await writeFile(
      config,
      [
        'version = 3',
        "imports = ['conf.d/*.toml']",
        '',
        "[plugins.'io.containerd.cri.v1.images']",
        "  snapshotter = 'overlayfs'",
        '',
        "  [plugins.'io.containerd.cri.v1.images'.pinned_images]",
        "    sandbox = 'pause:3.9'",
        '',
      ].join('\n'),
    );
    for (const [name, content] of Object.entries(dropIns)) {
      await writeFile(path.join(dir, 'conf.d', name), content);
    }
    return { bin, config };
  }
  const images = "plugins.'io.containerd.cri.v1.images'";

  it('config dump: the drop-ins in name order, each key replacing the same key, the others kept', async () => {
    const { bin, config } = await standIn({
      '20-b.toml': `version = 3\n[${images.replace(/'/g, '"')}]\n  snapshotter = "native"\n`,
      '10-a.toml': `version = 3\n[${images}]\n  snapshotter = 'zfs'\n  discard_unpacked_layers = [\n    'x',\n    'y' ]\n`,
      'ignored.conf': `version = 3\n[${images}]\n  snapshotter = 'btrfs'\n`,
    });
    const { stdout } = await execa(bin, ['--config', config, 'config', 'dump']);
    const dir = path.dirname(config);
    expect(stdout.split('\n')).toEqual([
      '# containerd stand-in: the configuration it loaded',
      `imports = ['${config}', '${dir}/conf.d/10-a.toml', '${dir}/conf.d/20-b.toml']`,
      'version = 3',
      `${images}.snapshotter = "native"`,
      `${images}.pinned_images.sandbox = 'pause:3.9'`,
      `${images}.discard_unpacked_layers = [ 'x', 'y' ]`,
    ]);
  });

  it('refuses a drop-in of a higher version than config.toml, as containerd does', async () => {
    const { bin, config } = await standIn({ '50-v4.toml': 'version = 4\n' });
    const res = await execa(bin, ['--config', config, 'config', 'dump'], { reject: false });
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toBe('containerd: drop-in config version 4 higher than root config version 3');
  });

  it('fails naming the file it cannot read, and TOML beyond it', async () => {
    const { bin, config } = await standIn({ '50-tables.toml': "[[plugins.'x'.list]]\n" });
    const missing = await execa(bin, ['--config=/nonexistent.toml', 'config', 'dump'], { reject: false });
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toMatch(/^containerd: failed to load TOML from \/nonexistent\.toml: /);
    const tables = await execa(bin, ['-c', config, 'config', 'dump'], { reject: false });
    expect(tables.exitCode).toBe(1);
    expect(tables.stderr).toContain('50-tables.toml:1: arrays of tables are beyond this stand-in');
  });
});

describe('artifact mirror: faults', () => {
  it('status faults fire the given number of times', async () => {
    await start({ faults: [{ path: PATHS.kubelet, kind: 'status', status: 500, times: 2 }] });
    expect((await get(PATHS.kubelet)).status).toBe(500);
    expect((await get(PATHS.kubelet)).status).toBe(500);
    expect((await get(PATHS.kubelet)).status).toBe(200);
    expect(mirror!.faults[0]!.times).toBe(0);
  });

  it('faults may be limited to a method and added while running', async () => {
    await start();
    mirror!.faults.push({ path: /kubelet$/, kind: 'status', status: 503, method: 'HEAD' });
    expect((await get(PATHS.kubelet, { method: 'HEAD' })).status).toBe(503);
    expect((await get(PATHS.kubelet)).status).toBe(200);
  });

  it('truncate sends a short body under the full Content-Length', async () => {
    await start({ faults: [{ path: PATHS.containerd, kind: 'truncate' }] });
    await expect(get(PATHS.containerd)).rejects.toThrow();
  });

  it('reset cuts the connection before answering', async () => {
    await start({ faults: [{ path: PATHS.runc, kind: 'reset', times: 1 }] });
    await expect(get(PATHS.runc)).rejects.toThrow();
    expect((await get(PATHS.runc)).status).toBe(200);
  });

  it('wrong-checksum and corrupt make the digest disagree with the body', async () => {
    await start({
      faults: [
        { path: `${PATHS.kubelet}.sha256`, kind: 'wrong-checksum' },
        { path: PATHS.cni, kind: 'corrupt' },
      ],
    });
    const kubelet = await get(PATHS.kubelet);
    expect((await get(`${PATHS.kubelet}.sha256`)).body.toString()).not.toBe(sha(kubelet.body));
    const cni = await get(PATHS.cni);
    expect((await get(`${PATHS.cni}.sha256`)).body.toString()).not.toContain(sha(cni.body));
    expect(Number(cni.length)).toBe(cni.body.length);
  });
});

describe('artifact mirror: large files', () => {
  it('streams /bench/blob-<bytes>.bin with a matching .sha256', async () => {
    await start();
    const bytes = 3 * 1024 * 1024 + 5;
    const head = await get(`/bench/blob-${bytes}.bin`, { method: 'HEAD' });
    expect(head.length).toBe(String(bytes));
    const blob = await get(`/bench/blob-${bytes}.bin`);
    expect(blob.body.length).toBe(bytes);
    expect((await get(`/bench/blob-${bytes}.bin.sha256`)).body.toString()).toBe(
      `${sha(blob.body)}  blob-${bytes}.bin\n`,
    );
  });

  it('refuses blobs above largeFileBytes', async () => {
    await start({ largeFileBytes: 1000 });
    expect((await get('/bench/blob-1000.bin')).status).toBe(200);
    expect((await get('/bench/blob-1001.bin')).status).toBe(404);
  });
});

describe('mirrorDownloads', () => {
  it('points every Downloads override at the mirror and parses as agent config', () => {
    const downloads = mirrorDownloads('http://127.0.0.1:39111/');
    expect(downloads).toEqual({
      Kubernetes: { BaseURL: 'http://127.0.0.1:39111/dl.k8s.io' },
      Crictl: { BaseURL: 'http://127.0.0.1:39111/github.com/kubernetes-sigs/cri-tools/releases/download' },
      Containerd: { BaseURL: 'http://127.0.0.1:39111/github.com/containerd/containerd/releases/download' },
      Runc: { BaseURL: 'http://127.0.0.1:39111/github.com/opencontainers/runc/releases/download' },
      CNI: { BaseURL: 'http://127.0.0.1:39111/github.com/containernetworking/plugins/releases/download' },
    });
    expect(agentConfigSchema.parse({ ...makeAgentConfig(), Downloads: downloads }).Downloads).toEqual(
      downloads,
    );
  });
});
