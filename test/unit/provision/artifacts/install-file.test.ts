import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../../../src/config/agent-config.js';
import type { AgentError } from '../../../../src/errors.js';
import { defaultOpenWrite } from '../../../../src/provision/artifacts/file-io.js';
import { installFromCache } from '../../../../src/provision/artifacts/install-file.js';
import { resolveArtifacts } from '../../../../src/provision/artifacts/resolve.js';
import type { ArtifactName, ArtifactSpec } from '../../../../src/provision/artifacts/types.js';
import { buildTarGz, type TarBuildEntry } from '../../../../src/sim/mirror/tar-build.js';
import { OUTSIDE_SECRET, maliciousLayers } from '../../../support/malicious-layers.js';
import { makeAgentConfig } from '../../../support/agent-config.js';
import { tempDirs, walkFiles } from './helpers.js';

const dirs = tempDirs();
afterEach(() => dirs.cleanup());

const specs = resolveArtifacts(agentConfigSchema.parse(makeAgentConfig()), 'amd64');
const spec = (name: ArtifactName): ArtifactSpec => specs.find((s) => s.name === name)!;
const deps = { openWrite: defaultOpenWrite, signal: new AbortController().signal };

/** Write `bytes` as a cache file; returns its path and digest. */
async function cacheFile(bytes: Buffer): Promise<{ file: string; sha256: string }> {
  const dir = await dirs.make('agentd-cache-');
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const file = path.join(dir, sha256);
  await writeFile(file, bytes);
  return { file, sha256 };
}

async function install(name: ArtifactName, entries: TarBuildEntry[], rootfs: string): Promise<void> {
  const { file, sha256 } = await cacheFile(buildTarGz(entries));
  await installFromCache(spec(name), file, sha256, rootfs, deps);
}

async function failure(promise: Promise<unknown>): Promise<AgentError> {
  try {
    await promise;
  } catch (err) {
    return err as AgentError;
  }
  throw new Error('expected the install to fail');
}

describe('installFromCache: archives', () => {
  it('takes only regular files from the expected directory', async () => {
    const rootfs = await dirs.make('agentd-rootfs-');
    await install(
      'containerd',
      [
        { path: 'bin/', type: 'directory' },
        { path: 'bin/containerd', content: 'c', mode: 0o700 },
        { path: 'bin/ctr', content: 'first' },
        { path: 'bin/ctr', content: 'second' },
        { path: 'bin/nested/evil', content: 'x' },
        { path: 'bin/link', type: 'symlink', linkTarget: '/etc/shadow' },
        { path: 'README.md', content: 'docs' },
      ],
      rootfs,
    );
    expect(await walkFiles(rootfs)).toEqual(['usr/local/bin/containerd', 'usr/local/bin/ctr']);
    expect(await readFile(path.join(rootfs, 'usr/local/bin/ctr'), 'utf8')).toBe('second');
    expect((await stat(path.join(rootfs, 'usr/local/bin/containerd'))).mode & 0o777).toBe(0o755);
  });

  it('accepts ./-prefixed entries (CNI tarballs)', async () => {
    const rootfs = await dirs.make('agentd-rootfs-');
    const plugins = ['bridge', 'host-local', 'loopback', 'portmap'];
    await install(
      'cni-plugins',
      [{ path: './', type: 'directory' }, ...plugins.map((p) => ({ path: `./${p}`, content: p }))],
      rootfs,
    );
    expect(await walkFiles(rootfs)).toEqual(plugins.map((p) => `opt/cni/bin/${p}`));
  });

  it.each([
    ['../escape', '".."'],
    ['bin/../../escape', '".."'],
    ['/etc/escape', 'absolute'],
  ])('rejects the whole archive when an entry is %s, leaving nothing behind', async (bad, why) => {
    const parent = await dirs.make('agentd-parent-');
    const rootfs = path.join(parent, 'rootfs');
    await mkdir(rootfs);
    const err = await failure(
      install(
        'containerd',
        [
          { path: 'bin/containerd', content: 'ok' },
          { path: bad, content: 'evil' },
        ],
        rootfs,
      ),
    );
    expect(err.code).toBe('UNSAFE_ARCHIVE');
    expect(err.message).toContain(bad);
    expect(err.message).toContain(why);
    expect(await walkFiles(parent)).toEqual([]);
  });

  it('an archive without a required file is DOWNLOAD_FAILED naming it', async () => {
    const rootfs = await dirs.make('agentd-rootfs-');
    const err = await failure(install('crictl', [{ path: 'critest', content: 'x' }], rootfs));
    expect(err.code).toBe('DOWNLOAD_FAILED');
    expect(err.message).toContain('crictl');
    expect(await walkFiles(rootfs)).toEqual([]);
  });

  it('a cache file that is not the digest it is filed under is CHECKSUM_MISMATCH', async () => {
    const rootfs = await dirs.make('agentd-rootfs-');
    const { file, sha256 } = await cacheFile(buildTarGz([{ path: 'crictl', content: 'x' }]));
    await writeFile(file, 'not a tarball at all');
    const err = await failure(installFromCache(spec('crictl'), file, sha256, rootfs, deps));
    expect(err.code).toBe('CHECKSUM_MISMATCH');
    expect(await walkFiles(rootfs)).toEqual([]);
  });
});

describe('installFromCache: hostile archives (the same cases as image layers)', () => {
  // One entry policy serves layers and artifacts: every hostile layer is refused as an artifact
  // tarball too, whether or not the installer would have taken the entry, and nothing is written.
  for (const hostile of maliciousLayers('/placeholder')) {
    it(`refuses ${hostile.name}: ${hostile.attack}`, async () => {
      const sandbox = await dirs.make('agentd-sandbox-');
      const rootfs = path.join(sandbox, 'rootfs');
      const outside = path.join(sandbox, 'outside');
      await mkdir(rootfs);
      await mkdir(outside);
      await writeFile(path.join(outside, 'secret'), OUTSIDE_SECRET);
      const entries = maliciousLayers(outside).find((l) => l.name === hostile.name)!.entries;
      const bytes = buildTarGz([{ path: 'bin/containerd', content: 'ok' }, ...entries]);
      const { file, sha256 } = await cacheFile(bytes);
      const err = await failure(installFromCache(spec('containerd'), file, sha256, rootfs, deps));
      expect(err.code).toBe('UNSAFE_ARCHIVE');
      expect(await readdir(outside)).toEqual(['secret']);
      expect(await readFile(path.join(outside, 'secret'), 'utf8')).toBe(OUTSIDE_SECRET);
      expect((await readdir(sandbox)).sort()).toEqual(['outside', 'rootfs']);
      expect(await walkFiles(rootfs)).toEqual([]);
    });
  }

  it('treats .wh. names as ordinary files (whiteouts belong to image layers)', async () => {
    const rootfs = await dirs.make('agentd-rootfs-');
    await install(
      'containerd',
      [
        { path: 'bin/containerd', content: 'c' },
        { path: 'bin/.wh.containerd', content: 'x' },
      ],
      rootfs,
    );
    expect(await walkFiles(rootfs)).toEqual(['usr/local/bin/.wh.containerd', 'usr/local/bin/containerd']);
  });
});

describe('installFromCache: rootfs safety', () => {
  it('refuses a rootfs whose usr/local/bin is a symlink leading outside it', async () => {
    const outside = await dirs.make('agentd-outside-');
    const rootfs = await dirs.make('agentd-rootfs-');
    await mkdir(path.join(rootfs, 'usr/local'), { recursive: true });
    await symlink(outside, path.join(rootfs, 'usr/local/bin'));
    const { file, sha256 } = await cacheFile(Buffer.from('#!/bin/sh\n'));
    const err = await failure(installFromCache(spec('runc'), file, sha256, rootfs, deps));
    expect(err.code).toBe('PRECONDITION_FAILED');
    expect(err.message).toContain(outside);
    expect(await walkFiles(outside)).toEqual([]);
  });

  it('replaces an existing binary atomically', async () => {
    const rootfs = await dirs.make('agentd-rootfs-');
    await mkdir(path.join(rootfs, 'usr/local/bin'), { recursive: true });
    await writeFile(path.join(rootfs, 'usr/local/bin/runc'), 'old');
    const { file, sha256 } = await cacheFile(Buffer.from('new'));
    await installFromCache(spec('runc'), file, sha256, rootfs, deps);
    expect(await readFile(path.join(rootfs, 'usr/local/bin/runc'), 'utf8')).toBe('new');
    expect(await walkFiles(rootfs)).toEqual(['usr/local/bin/runc']);
  });
});
