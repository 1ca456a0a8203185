import { createReadStream } from 'node:fs';
import { lstat, mkdir, mkdtemp, readFile, readdir, readlink, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyLayer } from '../../../../../src/provision/oci/layer/apply-layer.js';
import { zstdDecoderOf } from '../../../../../src/provision/oci/media-types.js';
import { buildTar, buildTarGz } from '../../../../../src/sim/mirror/tar-build.js';
import type { TarBuildEntry } from '../../../../../src/sim/mirror/tar-build.js';
import { OUTSIDE_SECRET, maliciousLayers } from '../../../../support/malicious-layers.js';

const GZIP = 'application/vnd.oci.image.layer.v1.tar+gzip';
const TAR = 'application/vnd.oci.image.layer.v1.tar';
const ZSTD = 'application/vnd.oci.image.layer.v1.tar+zstd';

let sandbox: string;
let target: string;
let outside: string;

beforeEach(async () => {
  sandbox = await mkdtemp(path.join(os.tmpdir(), 'agentd-apply-'));
  target = path.join(sandbox, 'rootfs');
  outside = path.join(sandbox, 'outside');
  await mkdir(target);
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret'), OUTSIDE_SECRET);
});

afterEach(async () => {
  await rm(sandbox, { recursive: true, force: true });
});

const apply = (entries: TarBuildEntry[]) =>
  applyLayer(target, Readable.from([buildTarGz(entries)]), { mediaType: GZIP });

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as { code?: string }).code ?? 'NO_CODE';
  }
  return 'RESOLVED';
}

describe('applyLayer: content', () => {
  it('writes files, directories, symlinks and hardlinks with modes and mtimes', async () => {
    const stats = await apply([
      { path: './', type: 'directory' },
      { path: './usr/', type: 'directory', mode: 0o755, mtime: 1_600_000_000 },
      { path: './usr/bin/', type: 'directory', mode: 0o750 },
      { path: './usr/bin/tool', content: '#!/bin/sh\necho hi\n', mode: 0o4755, mtime: 1_600_000_100 },
      { path: 'bin', type: 'symlink', linkTarget: 'usr/bin' },
      { path: 'usr/bin/tool-link', type: 'hardlink', linkTarget: 'usr/bin/tool' },
      { path: 'etc/deep/nested/file', content: 'implicit parents' },
    ]);
    expect(stats).toMatchObject({ files: 2, directories: 2, symlinks: 1, hardlinks: 1, whiteouts: 0 });
    const tool = await stat(path.join(target, 'usr/bin/tool'));
    expect(tool.mode & 0o7777).toBe(0o4755);
    expect(Math.floor(tool.mtimeMs / 1000)).toBe(1_600_000_100);
    expect((await stat(path.join(target, 'usr/bin'))).mode & 0o7777).toBe(0o750);
    expect(Math.floor((await stat(path.join(target, 'usr'))).mtimeMs / 1000)).toBe(1_600_000_000);
    expect(await readlink(path.join(target, 'bin'))).toBe('usr/bin');
    const link = await stat(path.join(target, 'usr/bin/tool-link'));
    expect(link.ino).toBe(tool.ino);
    expect(await readFile(path.join(target, 'etc/deep/nested/file'), 'utf8')).toBe('implicit parents');
  });

  it('keeps ownership when running as root', async () => {
    await apply([{ path: 'owned', content: 'x', uid: 1234, gid: 2345 }]);
    const st = await stat(path.join(target, 'owned'));
    const root = process.geteuid?.() === 0;
    expect([st.uid, st.gid]).toEqual(root ? [1234, 2345] : [process.geteuid?.(), process.getegid?.()]);
  });

  it('lets a later duplicate win and replaces a directory by a file', async () => {
    await apply([
      { path: 'f', content: 'first' },
      { path: 'f', content: 'second' },
      { path: 'd/', type: 'directory' },
      { path: 'd/child', content: 'x' },
      { path: 'd', content: 'now a file' },
      { path: 'keep/', type: 'directory' },
      { path: 'keep/a', content: 'a' },
      { path: 'keep/', type: 'directory', mode: 0o700 },
    ]);
    expect(await readFile(path.join(target, 'f'), 'utf8')).toBe('second');
    expect(await readFile(path.join(target, 'd'), 'utf8')).toBe('now a file');
    expect(await readFile(path.join(target, 'keep/a'), 'utf8')).toBe('a');
    expect((await stat(path.join(target, 'keep'))).mode & 0o777).toBe(0o700);
  });

  it('replaces an existing symlink instead of writing through it', async () => {
    await apply([{ path: 'link', type: 'symlink', linkTarget: '../outside/secret' }]);
    await apply([{ path: 'link', content: 'replaced' }]);
    expect((await lstat(path.join(target, 'link'))).isFile()).toBe(true);
    expect(await readFile(path.join(outside, 'secret'), 'utf8')).toBe(OUTSIDE_SECRET);
  });

  it('reads plain tar, sniffs the compression without a media type, and reads pax long names', async () => {
    const long = `${'x'.repeat(120)}/${'y'.repeat(200)}`;
    await applyLayer(target, Readable.from([buildTar([{ path: 'plain', content: 'p' }])]), {
      mediaType: TAR,
    });
    await applyLayer(target, Readable.from([buildTar([{ path: long, content: 'long' }])]));
    await applyLayer(
      target,
      Readable.from([buildTarGz([{ path: 'sniffed', type: 'symlink', linkTarget: 'z'.repeat(150) }])]),
    );
    expect(await readFile(path.join(target, 'plain'), 'utf8')).toBe('p');
    expect(await readFile(path.join(target, long), 'utf8')).toBe('long');
    expect(await readlink(path.join(target, 'sniffed'))).toBe('z'.repeat(150));
  });

  it('reads archives written by node-tar (pax headers, many chunks)', async () => {
    const src = path.join(sandbox, 'src');
    const deep = path.join(src, 'a'.repeat(90), 'b'.repeat(90));
    await mkdir(deep, { recursive: true });
    const big = Buffer.alloc(300_000, 7);
    await writeFile(path.join(deep, 'big.bin'), big);
    await writeFile(path.join(src, 'small'), 'small');
    const archive = path.join(sandbox, 'layer.tar.gz');
    await tar.create({ gzip: true, file: archive, cwd: src, portable: true }, ['.']);
    const stats = await applyLayer(target, createReadStream(archive, { highWaterMark: 1000 }));
    expect(stats.bytes).toBe(big.length + 5);
    expect((await readFile(path.join(target, 'a'.repeat(90), 'b'.repeat(90), 'big.bin'))).equals(big)).toBe(
      true,
    );
  });

  it('reads GNU long-name headers', async () => {
    const name = `gnu/${'n'.repeat(150)}`;
    const layer = buildTar([
      { path: '././@LongLink', typeflag: 'L', content: `${name}\0` },
      { path: name.slice(0, 100), content: 'gnu' },
    ]);
    await applyLayer(target, Readable.from([layer]), { mediaType: TAR });
    expect(await readFile(path.join(target, name), 'utf8')).toBe('gnu');
  });
});

describe('applyLayer: whiteouts', () => {
  it('removes lower files and directories named by .wh. entries', async () => {
    await apply([
      { path: 'etc/motd', content: 'bye' },
      { path: 'etc/keep', content: 'stay' },
      { path: 'var/cache/x/y', content: 'deep' },
    ]);
    const stats = await apply([
      { path: 'etc/.wh.motd' },
      { path: 'var/.wh.cache' },
      { path: 'etc/.wh.never-existed' },
    ]);
    expect(stats.whiteouts).toBe(3);
    expect(await readdir(path.join(target, 'etc'))).toEqual(['keep']);
    expect(await readdir(path.join(target, 'var'))).toEqual([]);
  });

  it('empties an opaque directory of lower content but keeps what the same layer wrote', async () => {
    await apply([
      { path: 'opt/app/old', content: 'old' },
      { path: 'opt/app/sub/old', content: 'old' },
      { path: 'opt/other', content: 'untouched' },
    ]);
    await apply([
      { path: 'opt/app/', type: 'directory' },
      { path: 'opt/app/new', content: 'new' },
      { path: 'opt/app/sub/', type: 'directory' },
      // the marker after the new entries: they belong to this layer and stay
      { path: 'opt/app/.wh..wh..opq' },
    ]);
    expect((await readdir(path.join(target, 'opt/app'))).sort()).toEqual(['new', 'sub']);
    expect(await readdir(path.join(target, 'opt/app/sub'))).toEqual([]);
    expect(await readFile(path.join(target, 'opt/other'), 'utf8')).toBe('untouched');
  });

  it('does not let a whiteout remove what the same layer wrote', async () => {
    await apply([{ path: 'file', content: 'mine' }, { path: '.wh.file' }]);
    expect(await readFile(path.join(target, 'file'), 'utf8')).toBe('mine');
  });

  it('never materializes whiteout files', async () => {
    await apply([{ path: 'a/.wh.b' }, { path: 'a/.wh..wh..opq' }, { path: 'a/.wh..wh.plnk' }]);
    expect(await readdir(target)).toEqual([]);
  });
});

describe('applyLayer: rejected layers', () => {
  async function outsideUntouched(): Promise<void> {
    expect(await readdir(outside)).toEqual(['secret']);
    expect(await readFile(path.join(outside, 'secret'), 'utf8')).toBe(OUTSIDE_SECRET);
    expect((await readdir(sandbox)).sort()).toEqual(['outside', 'rootfs']);
  }

  for (const layer of maliciousLayers(path.join(os.tmpdir(), 'placeholder'))) {
    it(`rejects ${layer.name}: ${layer.attack}`, async () => {
      const entries = maliciousLayers(outside).find((l) => l.name === layer.name)!.entries;
      expect(await codeOf(apply(entries))).toBe('UNSAFE_ARCHIVE');
      await outsideUntouched();
    });
  }

  it('names the offending entry in the error', async () => {
    const err = await apply([{ path: '../outside/pwned', content: 'x' }]).catch((e: unknown) => e);
    expect((err as { data: { entry: string } }).data.entry).toBe('../outside/pwned');
  });

  it('rejects a layer that writes through a symlink planted by an earlier layer', async () => {
    await apply([{ path: 'escape', type: 'symlink', linkTarget: '../outside' }]);
    expect(await codeOf(apply([{ path: 'escape/pwned', content: 'x' }]))).toBe('UNSAFE_ARCHIVE');
    await outsideUntouched();
  });

  it('rejects unsupported entry types and replacing the root', async () => {
    expect(await codeOf(apply([{ path: 'sparse', typeflag: 'S', content: 'x' }]))).toBe('UNSAFE_ARCHIVE');
    expect(await codeOf(apply([{ path: '.', content: 'x' }]))).toBe('UNSAFE_ARCHIVE');
  });

  // Both branches run in CI: the main run's Node.js 20 has no zstd decoder, the second runtime's does.
  it(
    zstdDecoderOf()
      ? 'applies zstd layers, by media type and by sniffing, and rejects a corrupt or cut one'
      : 'rejects zstd layers as UNSUPPORTED on this runtime, naming it, by media type and by sniffing',
    async () => {
      const compress = (zlib as { zstdCompressSync?: (bytes: Buffer) => Buffer }).zstdCompressSync;
      if (zstdDecoderOf() && compress) {
        const layer = compress(
          buildTar([
            { path: 'etc/', type: 'directory', mode: 0o755 },
            { path: 'etc/os-release', content: 'ID=zstd\n'.repeat(2000) },
          ]),
        );
        expect(await applyLayer(target, Readable.from([layer]), { mediaType: ZSTD })).toMatchObject({
          files: 1,
        });
        expect(await readFile(path.join(target, 'etc/os-release'), 'utf8')).toBe('ID=zstd\n'.repeat(2000));
        const sniffed = path.join(sandbox, 'sniffed');
        await mkdir(sniffed);
        await applyLayer(sniffed, Readable.from([layer]));
        expect(await readFile(path.join(sniffed, 'etc/os-release'), 'utf8')).toBe('ID=zstd\n'.repeat(2000));
        const corrupt = Buffer.from(layer);
        corrupt.fill(0x55, 12, 40);
        await expect(applyLayer(target, Readable.from([corrupt]), { mediaType: ZSTD })).rejects.toMatchObject(
          {
            code: 'UNSAFE_ARCHIVE',
            message: expect.stringContaining('the zstd stream is corrupt'),
          },
        );
        const cut = layer.subarray(0, layer.length - 8);
        expect(await codeOf(applyLayer(target, Readable.from([cut]), { mediaType: ZSTD }))).toBe(
          'UNSAFE_ARCHIVE',
        );
      } else {
        const zstdMagic = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]);
        const unsupported = {
          code: 'UNSUPPORTED',
          message: expect.stringContaining(`this runtime (Node.js ${process.version}) has no zstd decoder`),
        };
        await expect(
          applyLayer(target, Readable.from([zstdMagic]), { mediaType: ZSTD }),
        ).rejects.toMatchObject(unsupported);
        await expect(applyLayer(target, Readable.from([zstdMagic]))).rejects.toMatchObject(unsupported);
        expect(await readdir(target)).toEqual([]);
      }
      expect(
        await codeOf(applyLayer(target, Readable.from([Buffer.alloc(8)]), { mediaType: 'text/plain' })),
      ).toBe('UNSUPPORTED');
    },
  );

  it('rejects corrupt and truncated archives', async () => {
    const gz = buildTarGz([{ path: 'f', content: 'x'.repeat(5000) }]);
    const corrupt = Buffer.from(gz);
    corrupt[20] = (corrupt[20] ?? 0) ^ 0xff;
    expect(await codeOf(applyLayer(target, Readable.from([corrupt]), { mediaType: GZIP }))).toBe(
      'UNSAFE_ARCHIVE',
    );
    const tarBytes = buildTar([{ path: 'f', content: 'x'.repeat(5000) }]);
    const truncated = tarBytes.subarray(0, 512 + 1000);
    expect(await codeOf(applyLayer(target, Readable.from([truncated]), { mediaType: TAR }))).toBe(
      'UNSAFE_ARCHIVE',
    );
    const badHeader = Buffer.from(tarBytes);
    badHeader[0] = 0x41;
    expect(await codeOf(applyLayer(target, Readable.from([badHeader]), { mediaType: TAR }))).toBe(
      'UNSAFE_ARCHIVE',
    );
  });

  it('fails with PRECONDITION_FAILED when the target does not exist', async () => {
    const missing = path.join(sandbox, 'missing');
    expect(await codeOf(applyLayer(missing, Readable.from([buildTar([])])))).toBe('PRECONDITION_FAILED');
  });

  it('stops with CANCELLED when the signal is aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const p = applyLayer(target, Readable.from([buildTarGz([{ path: 'f', content: 'x' }])]), {
      signal: controller.signal,
    });
    expect(await codeOf(p)).toBe('CANCELLED');
  });
});
