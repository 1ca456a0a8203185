/**
 * The production provisioner wired from oci/, artifacts/ and files/, against the sim mirror on
 * 127.0.0.1 and a temp root: what a provision + stage writes, the caches, the failures that
 * must leave nothing behind (no manifest for this platform, ENOSPC), and a preflight that
 * creates nothing.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentConfigSchema, type AgentConfig } from '../../../src/config/agent-config.js';
import type { TaskContext } from '../../../src/tasks/tasks.js';
import { isAgentError, type AgentError } from '../../../src/errors.js';
import { createHostPaths, type HostPaths } from '../../../src/host/paths.js';
import { createMetrics } from '../../../src/metrics/metrics.js';
import { defaultOpenWrite } from '../../../src/provision/artifacts/file-io.js';
import type { OpenWrite } from '../../../src/provision/artifacts/types.js';
import {
  createProvisioner,
  describeDiskSpace,
  hostArch,
  type ProvisionerOptions,
} from '../../../src/provision/provisioner.js';
import { startMirror, type Mirror } from '../../../src/sim/mirror/index.js';
import { createOciImage, type OciImage } from '../../../src/sim/mirror/oci-image.js';
import {
  badCacheEntries,
  exists,
  mirrorAgentConfig,
  snapshotTree,
  TEST_IMAGE_REPOSITORY,
} from '../../support/provision-fixtures.js';
import { createFakeClock } from '../host/fake-clock.js';

const run = promisify(execFile);
const silent = pino({ level: 'silent' });

async function failure(p: Promise<unknown>): Promise<AgentError> {
  const err = await p.then(
    () => {
      throw new Error('expected a failure');
    },
    (e: unknown) => e,
  );
  if (!isAgentError(err)) throw err;
  return err;
}

/** The sim image with its index cut down to the `linux/amd64` manifest. */
function amd64OnlyImage(): OciImage {
  const full = createOciImage();
  const index = JSON.parse(full.index.data.toString('utf8')) as {
    manifests: Array<{ platform: { architecture: string } }>;
  };
  index.manifests = index.manifests.filter((m) => m.platform.architecture === 'amd64');
  const data = Buffer.from(JSON.stringify(index));
  const blob = {
    digest: `sha256:${createHash('sha256').update(data).digest('hex')}`,
    mediaType: full.index.mediaType,
    data,
  };
  const manifestsByDigest = new Map(full.manifestsByDigest);
  manifestsByDigest.delete(full.index.digest);
  manifestsByDigest.set(blob.digest, blob);
  return { ...full, index: blob, manifestsByDigest };
}

describe('hostArch', () => {
  it('maps node architectures to OCI/Kubernetes names', () => {
    expect(hostArch('x64')).toBe('amd64');
    expect(hostArch('arm64')).toBe('arm64');
  });

  it('refuses any other architecture with UNSUPPORTED, naming it', () => {
    let err: unknown;
    try {
      hostArch('s390x');
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'UNSUPPORTED' });
    expect((err as Error).message).toContain('s390x');
    expect((err as Error).message).toMatch(/amd64.*arm64/);
  });
});

describe('createProvisioner', () => {
  let dir: string;
  let paths: HostPaths;
  let stateDir: string;
  let mirror: Mirror | undefined;
  let reloads: number;
  let metrics: ReturnType<typeof createMetrics>;
  const ctx = (): TaskContext => ({
    signal: new AbortController().signal,
    logger: silent,
    progress: () => undefined,
  });

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-provisioner-'));
    paths = createHostPaths(path.join(dir, 'root'));
    stateDir = path.join(dir, 'state');
    await mkdir(paths.resolve('/etc'), { recursive: true });
    await writeFile(paths.resolve('/etc/hostname'), 'node-7\n');
    await writeFile(paths.resolve('/etc/resolv.conf'), 'nameserver 10.0.0.2\n');
    reloads = 0;
    metrics = createMetrics({ version: 'test', collectDefaults: false });
  });
  afterEach(async () => {
    await mirror?.close();
    mirror = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  function provisioner(options: Partial<ProvisionerOptions> = {}) {
    return createProvisioner({
      paths,
      stateDir,
      clock: createFakeClock(),
      logger: silent,
      metrics,
      daemonReload: async () => {
        reloads++;
      },
      arch: 'amd64',
      minFreeBytes: 1,
      ...options,
    });
  }

  function config(m: Mirror, overrides: Parameters<typeof mirrorAgentConfig>[1] = {}): AgentConfig {
    return agentConfigSchema.parse(mirrorAgentConfig(m, overrides));
  }

  it.each(['amd64', 'arm64'] as const)(
    'provisions and stages a linux/%s machine: image, artifacts, OS, nspawn and staged files',
    async (arch) => {
      mirror = await startMirror();
      const p = provisioner({ arch });
      const c = config(mirror);
      const image = createOciImage();
      const rootfs = paths.machineDir('kube1');

      const result = await p.provision('kube1', c, ctx());
      await p.stage('kube1', c, ctx());
      expect(result).toMatchObject({ imageDigest: image.manifests[arch].digest, cacheHits: 0 });
      expect(result.downloadedBytes).toBeGreaterThan(0);
      expect(reloads).toBe(1);

      expect(await readFile(path.join(rootfs, 'etc/agentd-image-arch'), 'utf8')).toBe(`${arch}\n`);
      expect(await readFile(path.join(rootfs, 'etc/hostname'), 'utf8')).toBe('node-7\n');
      const { stdout } = await run(path.join(rootfs, 'usr/local/bin/kubelet'), ['--version']);
      expect(stdout.trim()).toBe('Kubernetes v1.34.0');
      expect(await readFile(path.join(rootfs, 'usr/local/bin/kubelet'), 'utf8')).toContain(`linux/${arch}`);
      // Every file a dry run would announce is there (the applied config comes at commit).
      const planned = p.plannedFiles('kube1', c).filter((f) => !f.startsWith(paths.agentConfigDir));
      for (const f of planned) expect(await exists(f), f).toBe(true);
      expect(planned).toContain(paths.nspawnFile('kube1'));
      expect(planned).toContain(paths.nspawnDropIn('kube1'));
      expect(await badCacheEntries(path.join(stateDir, 'cache'))).toEqual([]);
    },
  );

  it('a second machine comes from the caches: no byte downloaded, every artifact a cache hit', async () => {
    mirror = await startMirror();
    const p = provisioner();
    const c = config(mirror);
    await p.provision('kube1', c, ctx());
    const again = await p.provision('kube2', c, ctx());
    expect(again).toMatchObject({ downloadedBytes: 0, cacheHits: 7 });
    const text = await metrics.registry.metrics();
    expect(text).toContain('agentd_download_cache_hits_total{kind="artifact"} 7');
  });

  it('removeMachineFiles removes the nspawn settings and drop-in, and tolerates their absence', async () => {
    mirror = await startMirror();
    const p = provisioner();
    await p.provision('kube1', config(mirror), ctx());
    await p.removeMachineFiles('kube1');
    expect(await exists(paths.nspawnFile('kube1'))).toBe(false);
    expect(await exists(paths.nspawnDropIn('kube1'))).toBe(false);
    await p.removeMachineFiles('kube1');
    await p.removeMachineFiles('kube2');
  });

  it('an image index with no manifest for this platform is IMAGE_PULL_FAILED naming both, leaving nothing', async () => {
    mirror = await startMirror({ image: amd64OnlyImage });
    const p = provisioner({ arch: 'arm64' });
    const err = await failure(p.provision('kube1', config(mirror), ctx()));
    expect(err.code).toBe('IMAGE_PULL_FAILED');
    expect(err.message).toContain('linux/arm64');
    expect(err.message).toContain('platforms available: linux/amd64');
    expect(err.message).toContain(TEST_IMAGE_REPOSITORY);
    // Nothing written: the target is empty, no artifact was fetched, no nspawn file, no reload.
    expect(await readdir(paths.machineDir('kube1'))).toEqual([]);
    expect(await exists(path.join(stateDir, 'cache/artifacts'))).toBe(false);
    expect(await badCacheEntries(path.join(stateDir, 'cache'))).toEqual([]);
    expect(await exists(paths.nspawnFile('kube1'))).toBe(false);
    expect(reloads).toBe(0);
  });

  it('ENOSPC while downloading an artifact is NO_SPACE, with nothing partial left', async () => {
    mirror = await startMirror();
    const enospc: OpenWrite = (file, options) => {
      const real = defaultOpenWrite(file, options);
      return new Writable({
        write(chunk: Buffer, _enc, cb) {
          // Part of the data reaches the disk, then the device is full.
          real.write(chunk.subarray(0, 1), () => {
            cb(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }));
          });
        },
        destroy(err, cb) {
          real.destroy();
          real.once('close', () => cb(err));
        },
      });
    };
    const p = provisioner({ openWrite: enospc });
    const err = await failure(p.provision('kube1', config(mirror), ctx()));
    expect(err.code).toBe('NO_SPACE');
    expect(err.message).toMatch(/no space left on device/);
    // No partial download in the cache, no artifact in the rootfs, no nspawn file.
    expect(await badCacheEntries(path.join(stateDir, 'cache'))).toEqual([]);
    const files = Object.keys(await snapshotTree(paths.machineDir('kube1'), { dirs: false })).filter(
      (f) => f.startsWith('usr/local/bin/') || f.startsWith('opt/cni/bin/'),
    );
    expect(files).toEqual([]);
    expect(await exists(paths.nspawnFile('kube1'))).toBe(false);
    expect(reloads).toBe(0);
  });

  describe('preflight', () => {
    it('passes against a healthy mirror and creates nothing under the root or the state dir', async () => {
      mirror = await startMirror();
      const before = await snapshotTree(dir);
      const checks = await provisioner().preflight(config(mirror), new AbortController().signal);
      expect(checks.filter((c) => !c.ok)).toEqual([]);
      expect(checks.map((c) => c.name)).toContain('image');
      expect(checks.map((c) => c.name)).toContain('disk-space');
      expect(await snapshotTree(dir)).toEqual(before);
    });

    it('reports too little disk space, naming the directory and the need', async () => {
      mirror = await startMirror();
      const p = provisioner({ minFreeBytes: Number.MAX_SAFE_INTEGER });
      const checks = await p.preflight(config(mirror), new AbortController().signal);
      const disk = checks.find((c) => c.name === 'disk-space');
      expect(disk?.ok).toBe(false);
      // The machines directory does not exist yet: its nearest existing parent is measured.
      expect(disk?.message).toContain(paths.root);
      expect(disk?.message).toMatch(/GiB free in .* \(need \d+/);
    });

    it('says figures that differ when the space is short: MiB below 1 GiB, free rounded down, need up', () => {
      const GiB = 1024 ** 3;
      expect(describeDiskSpace(0.04 * GiB, 0.1 * GiB, '/m')).toBe('40 MiB free in /m (need 103 MiB)');
      expect(describeDiskSpace(1.99 * GiB, 2 * GiB, '/m')).toBe('1.9 GiB free in /m (need 2.0 GiB)');
      expect(describeDiskSpace(900 * 1024 ** 2, 2 * GiB, '/m')).toBe('900 MiB free in /m (need 2.0 GiB)');
      expect(describeDiskSpace(12.34 * GiB, 2 * GiB, '/m')).toBe('12.3 GiB free in /m (need 2.0 GiB)');
    });

    it('reports an unreachable mirror as failed checks, never by throwing', async () => {
      mirror = await startMirror();
      const c = config(mirror);
      await mirror.close();
      mirror = undefined;
      const checks = await provisioner().preflight(c, new AbortController().signal);
      expect(checks.find((x) => x.name === 'image')?.ok).toBe(false);
      expect(checks.filter((x) => x.name.startsWith('artifact')).every((x) => !x.ok)).toBe(true);
    });
  });
});
