import { createHash } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentError } from '../../../../src/errors.js';
import type { ProgressEvent } from '../../../../src/host/types.js';
import {
  installArtifacts,
  type InstallArtifactsOptions,
} from '../../../../src/provision/artifacts/install-artifacts.js';
import type { OpenWrite } from '../../../../src/provision/artifacts/types.js';
import { defaultOpenWrite } from '../../../../src/provision/artifacts/file-io.js';
import {
  ALL_INSTALLED_FILES,
  fakeClock,
  mirrorConfig,
  startMirror,
  tempDirs,
  testDispatcher,
  walkFiles,
  type TestMirror,
} from './helpers.js';
import { expectBackoff } from '../../../support/backoff.js';

const KUBELET = '/dl.k8s.io/v1.34.0/bin/linux/amd64/kubelet';
const CONTAINERD =
  '/github.com/containerd/containerd/releases/download/v2.0.4/containerd-2.0.4-linux-amd64.tar.gz';

const dirs = tempDirs();
let mirror: TestMirror;
let dispatcher: ReturnType<typeof testDispatcher>;
let cacheDir: string;
let rootfs: string;

beforeEach(async () => {
  mirror = await startMirror();
  dispatcher = testDispatcher();
  cacheDir = await dirs.make('agentd-cache-');
  rootfs = await dirs.make('agentd-rootfs-');
});

afterEach(async () => {
  await dispatcher.close();
  await mirror.close();
  await dirs.cleanup();
});

/** Options for a run against the test mirror; no real sleeps, no version probing unless asked. */
function opts(extra: Partial<InstallArtifactsOptions> = {}): InstallArtifactsOptions {
  return {
    arch: 'amd64',
    cacheDir,
    dispatcher,
    clock: fakeClock().clock,
    versionProbe: async () => null,
    ...extra,
  };
}

async function failure(promise: Promise<unknown>): Promise<AgentError> {
  try {
    await promise;
  } catch (err) {
    return err as AgentError;
  }
  throw new Error('expected the install to fail');
}

/** The cache may only hold complete entries named by their digest, and the rootfs no temp files. */
async function expectNoPartialFiles(): Promise<void> {
  for (const f of await walkFiles(cacheDir)) {
    expect(f).toMatch(/^sha256\/[0-9a-f]{64}$/);
    const bytes = await readFile(path.join(cacheDir, f));
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(path.basename(f));
  }
  for (const f of await walkFiles(rootfs)) expect(ALL_INSTALLED_FILES).toContain(f);
}

const assetGets = (): string[] =>
  mirror.requests.filter((r) => r.method === 'GET' && !/\.sha256(sum)?$/.test(r.path)).map((r) => r.path);

describe('installArtifacts', () => {
  it('installs every artifact from the mirror, verified, with mode 0755', async () => {
    const result = await installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts());
    expect(result.installed).toEqual([
      'kubelet',
      'kubectl',
      'kube-proxy',
      'crictl',
      'containerd',
      'runc',
      'cni-plugins',
    ]);
    expect(result.skipped).toEqual([]);
    expect(result.cacheHits).toBe(0);
    expect(result.retries).toBe(0);
    expect(await walkFiles(rootfs)).toEqual(ALL_INSTALLED_FILES);
    for (const f of ALL_INSTALLED_FILES) expect((await stat(path.join(rootfs, f))).mode & 0o777).toBe(0o755);
    expect(await readFile(path.join(rootfs, 'usr/local/bin/kubelet'), 'utf8')).toContain(
      'Kubernetes v1.34.0',
    );
    const cached = await walkFiles(cacheDir);
    expect(cached).toHaveLength(7);
    let total = 0;
    for (const f of cached) total += (await stat(path.join(cacheDir, f))).size;
    expect(result.downloadedBytes).toBe(total);
    await expectNoPartialFiles();
  });

  it('a warm cache downloads 0 artifact bytes (only checksum files)', async () => {
    const config = mirrorConfig(mirror.baseUrl);
    await installArtifacts(config, rootfs, opts());
    mirror.requests.length = 0;
    const fresh = await dirs.make('agentd-rootfs2-');
    const result = await installArtifacts(config, fresh, opts());
    expect(result).toMatchObject({ downloadedBytes: 0, cacheHits: 7 });
    expect(assetGets()).toEqual([]);
    expect(await walkFiles(fresh)).toEqual(ALL_INSTALLED_FILES);
  });

  it('skips artifacts whose installed binary already reports the wanted version (real probe)', async () => {
    await installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts());
    mirror.requests.length = 0;
    const { versionProbe: _noProbe, ...withDefaultProbe } = opts();
    const again = await installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, withDefaultProbe);
    expect(again.skipped).toEqual([
      'kubelet',
      'kubectl',
      'kube-proxy',
      'crictl',
      'containerd',
      'runc',
      'cni-plugins',
    ]);
    expect(again.installed).toEqual([]);
    expect(mirror.requests).toEqual([]);

    const newer = mirrorConfig(mirror.baseUrl, {
      CRI: { Containerd: { Version: '2.1.0' }, Runc: { Version: '1.1.12' } },
    });
    const upgraded = await installArtifacts(newer, rootfs, withDefaultProbe);
    expect(upgraded.installed).toEqual(['containerd']);
    expect(await readFile(path.join(rootfs, 'usr/local/bin/containerd'), 'utf8')).toContain('v2.1.0');
  });

  it('reports throttled progress per artifact and a final event with the full size', async () => {
    const events: ProgressEvent[] = [];
    await installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ progress: (e) => events.push(e) }));
    const kubelet = events.filter((e) => e.task === 'download kubelet');
    const last = kubelet.at(-1)!;
    expect(last.bytes).toBe(last.totalBytes);
    expect(last.bytes).toBeGreaterThan(0);
    // The fake clock never advances, so only the first update and the final event get through.
    expect(kubelet.length).toBeLessThanOrEqual(2);
  });

  it('a wrong published checksum is CHECKSUM_MISMATCH naming artifact, version, URL, want and got', async () => {
    mirror.faults.push({ path: `${KUBELET}.sha256`, kind: 'wrong-checksum' });
    const err = await failure(installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts()));
    expect(err.code).toBe('CHECKSUM_MISMATCH');
    expect(err.message).toContain('kubelet 1.34.0');
    expect(err.message).toContain(`${mirror.baseUrl}${KUBELET}`);
    expect(err.data).toMatchObject({ expected: expect.any(String), actual: expect.any(String) });
    expect(err.message).toContain(String(err.data.expected));
    expect(err.message).toContain(String(err.data.actual));
    await expectNoPartialFiles();
  });

  it('a corrupted body is CHECKSUM_MISMATCH and is not retried', async () => {
    const { clock, sleeps } = fakeClock();
    mirror.faults.push({ path: CONTAINERD, kind: 'corrupt' });
    const err = await failure(installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ clock })));
    expect(err.code).toBe('CHECKSUM_MISMATCH');
    expect(sleeps).toEqual([]);
    await expectNoPartialFiles();
  });

  it('a body that keeps getting truncated is DOWNLOAD_FAILED after the retries, nothing left behind', async () => {
    const { clock, sleeps } = fakeClock();
    mirror.faults.push({ path: KUBELET, kind: 'truncate' });
    const err = await failure(
      installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ clock, retries: 2 })),
    );
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.message).toContain(KUBELET);
    expectBackoff(sleeps, [500, 1000]);
    await expectNoPartialFiles();
  });

  it('a truncated body once is retried and succeeds', async () => {
    mirror.faults.push({ path: KUBELET, kind: 'truncate', times: 1 });
    const result = await installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts());
    expect(result.retries).toBe(1);
    expect(await walkFiles(rootfs)).toEqual(ALL_INSTALLED_FILES);
  });

  it('404 on a checksum (a version not on the mirror) fails at once with the status and URL', async () => {
    const { clock, sleeps } = fakeClock();
    const config = mirrorConfig(mirror.baseUrl, {
      CRI: { Containerd: { Version: '99.0.0' }, Runc: { Version: '1.1.12' } },
    });
    const err = await failure(installArtifacts(config, rootfs, opts({ clock })));
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.data).toMatchObject({ status: 404 });
    expect(err.message).toContain('containerd-99.0.0-linux-amd64.tar.gz.sha256sum');
    expect(sleeps).toEqual([]);
    await expectNoPartialFiles();
  });

  it('403 on the artifact itself is not retried', async () => {
    const { clock, sleeps } = fakeClock();
    mirror.faults.push({ path: KUBELET, kind: 'status', status: 403 });
    const err = await failure(installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ clock })));
    expect(err).toMatchObject({ code: 'DOWNLOAD_FAILED', data: { status: 403 } });
    expect(sleeps).toEqual([]);
    await expectNoPartialFiles();
  });

  it('500 is retried with capped exponential backoff, then fails', async () => {
    const { clock, sleeps } = fakeClock();
    mirror.faults.push({ path: KUBELET, kind: 'status', status: 500 });
    const err = await failure(
      installArtifacts(
        mirrorConfig(mirror.baseUrl),
        rootfs,
        opts({ clock, retries: 4, maxRetryDelayMs: 2000 }),
      ),
    );
    expect(err).toMatchObject({ code: 'DOWNLOAD_FAILED', data: { status: 500 } });
    expectBackoff(sleeps, [500, 1000, 2000, 2000]);
    expect(mirror.requests.filter((r) => r.path === KUBELET)).toHaveLength(5);
    await expectNoPartialFiles();
  });

  it('500 twice then OK succeeds', async () => {
    const { clock, sleeps } = fakeClock();
    mirror.faults.push({ path: KUBELET, kind: 'status', status: 503, times: 2 });
    const result = await installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ clock }));
    expect(result.retries).toBe(2);
    expectBackoff(sleeps, [500, 1000]);
    expect(await walkFiles(rootfs)).toEqual(ALL_INSTALLED_FILES);
  });

  it('a connection reset is retried', async () => {
    mirror.faults.push({ path: `${KUBELET}.sha256`, kind: 'reset', times: 1 });
    const result = await installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts());
    expect(result.retries).toBe(1);
  });

  it('ENOSPC while writing the download is NO_SPACE, nothing left behind', async () => {
    const full: OpenWrite = (file, options) => {
      if (!file.includes(`${path.sep}sha256${path.sep}`)) return defaultOpenWrite(file, options);
      const real = defaultOpenWrite(file, options);
      return new Writable({
        write(chunk: Buffer, _enc, cb) {
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
    const err = await failure(
      installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ openWrite: full })),
    );
    expect(err.code).toBe('NO_SPACE');
    await expectNoPartialFiles();
    expect(await walkFiles(cacheDir)).toEqual([]);
  });

  it('ENOSPC while installing into the rootfs is NO_SPACE, nothing left in the rootfs', async () => {
    const full: OpenWrite = (file, options) => {
      if (!file.startsWith(rootfs)) return defaultOpenWrite(file, options);
      const real = defaultOpenWrite(file, options);
      return new Writable({
        write(_chunk, _enc, cb) {
          cb(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }));
        },
        destroy(err, cb) {
          real.destroy();
          real.once('close', () => cb(err));
        },
      });
    };
    const err = await failure(
      installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ openWrite: full })),
    );
    expect(err.code).toBe('NO_SPACE');
    expect(await walkFiles(rootfs)).toEqual([]);
    await expectNoPartialFiles();
  });

  it('cancellation aborts in-flight downloads and deletes their temp files', async () => {
    mirror.faults.push({ path: KUBELET, kind: 'stall' });
    const controller = new AbortController();
    const progress = (e: ProgressEvent): void => {
      if (e.task === 'download kubelet' && (e.bytes ?? 0) > 0) controller.abort();
    };
    const err = await failure(
      installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ signal: controller.signal, progress })),
    );
    expect(err.code).toBe('CANCELLED');
    await expectNoPartialFiles();
    expect((await walkFiles(cacheDir)).length).toBeLessThan(7);
  });

  it('a cache entry damaged on disk is dropped and downloaded again', async () => {
    const config = mirrorConfig(mirror.baseUrl);
    await installArtifacts(config, rootfs, opts());
    const [victim] = await walkFiles(cacheDir);
    await writeFile(path.join(cacheDir, victim!), 'bit rot');
    const fresh = await dirs.make('agentd-rootfs2-');
    const result = await installArtifacts(config, fresh, opts());
    expect(result.cacheHits).toBe(6);
    expect(result.downloadedBytes).toBeGreaterThan(0);
    expect(await walkFiles(fresh)).toEqual(ALL_INSTALLED_FILES);
    const repaired = await readFile(path.join(cacheDir, victim!));
    expect(createHash('sha256').update(repaired).digest('hex')).toBe(path.basename(victim!));
  });

  it('runs every artifact at once without piling listeners on one signal', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w);
    };
    process.on('warning', onWarning);
    try {
      const controller = new AbortController();
      const result = await installArtifacts(
        mirrorConfig(mirror.baseUrl),
        rootfs,
        opts({ concurrency: 16, signal: controller.signal }),
      );
      expect(result.installed).toHaveLength(7);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });

  it('rejects a concurrency that is not a positive integer', async () => {
    const err = await failure(
      installArtifacts(mirrorConfig(mirror.baseUrl), rootfs, opts({ concurrency: 0 })),
    );
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.message).toContain('concurrency');
  });
});
