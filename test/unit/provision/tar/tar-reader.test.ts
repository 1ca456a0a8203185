import { describe, expect, it } from 'vitest';
import { readTarEntries } from '../../../../src/provision/tar/tar-reader.js';
import { normalizeEntryPath } from '../../../../src/provision/tar/entry-path.js';
import { buildTar } from '../../../../src/sim/mirror/tar-build.js';

async function* chunked(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

describe('readTarEntries', () => {
  it('yields entries with metadata and skips bodies the consumer did not read', async () => {
    const archive = buildTar([
      { path: 'a', content: 'x'.repeat(700), mode: 0o640, uid: 7, gid: 8, mtime: 1234 },
      { path: 'b/', type: 'directory' },
      { path: 'c', content: 'second' },
      { path: 'l', type: 'symlink', linkTarget: 'c' },
    ]);
    const seen: unknown[] = [];
    for await (const e of readTarEntries(chunked(archive, 100))) {
      let body = '';
      if (e.path === 'c') for await (const part of e.body) body += part.toString();
      seen.push({
        path: e.path,
        kind: e.kind,
        mode: e.mode,
        uid: e.uid,
        gid: e.gid,
        mtime: e.mtime,
        size: e.size,
        link: e.linkname,
        body,
      });
    }
    expect(seen).toEqual([
      { path: 'a', kind: 'file', mode: 0o640, uid: 7, gid: 8, mtime: 1234, size: 700, link: '', body: '' },
      {
        path: 'b/',
        kind: 'directory',
        mode: 0o755,
        uid: 0,
        gid: 0,
        mtime: expect.any(Number),
        size: 0,
        link: '',
        body: '',
      },
      {
        path: 'c',
        kind: 'file',
        mode: 0o644,
        uid: 0,
        gid: 0,
        mtime: expect.any(Number),
        size: 6,
        link: '',
        body: 'second',
      },
      {
        path: 'l',
        kind: 'symlink',
        mode: 0o777,
        uid: 0,
        gid: 0,
        mtime: expect.any(Number),
        size: 0,
        link: 'c',
        body: '',
      },
    ]);
  });

  it('applies pax overrides (path, mtime, uid) to the next entry only', async () => {
    const pax = (records: string): Buffer => Buffer.from(records);
    const rec = (k: string, v: string): string => {
      const body = ` ${k}=${v}\n`;
      let n = body.length + 2;
      while (String(n).length + body.length !== n) n++;
      return `${n}${body}`;
    };
    const archive = buildTar([
      {
        path: 'PaxHeader',
        typeflag: 'x',
        content: pax(rec('path', 'renamed/file') + rec('mtime', '1700000000.5') + rec('uid', '4242')),
      },
      { path: 'short', content: 'p' },
      { path: 'next', content: 'n' },
    ]);
    const got = [];
    for await (const e of readTarEntries(chunked(archive, 512))) got.push([e.path, e.mtime, e.uid]);
    expect(got).toEqual([
      ['renamed/file', 1700000000.5, 4242],
      ['next', expect.any(Number), 0],
    ]);
  });

  it('rejects sparse pax entries and malformed pax records', async () => {
    const sparse = buildTar([
      { path: 'P', typeflag: 'x', content: '22 GNU.sparse.size=10\n' },
      { path: 'f', content: 'x' },
    ]);
    await expect(readAll(sparse)).rejects.toMatchObject({ code: 'UNSAFE_ARCHIVE' });
    const bad = buildTar([
      { path: 'P', typeflag: 'x', content: '99 path=x\n' },
      { path: 'f', content: 'x' },
    ]);
    await expect(readAll(bad)).rejects.toMatchObject({ code: 'UNSAFE_ARCHIVE' });
  });
});

async function readAll(archive: Buffer): Promise<number> {
  let n = 0;
  for await (const _ of readTarEntries(chunked(archive, 512))) n++;
  return n;
}

describe('normalizeEntryPath', () => {
  it.each([
    ['./etc/hostname', 'etc/hostname'],
    ['etc//x/./y/', 'etc/x/y'],
    ['./', ''],
    ['.', ''],
  ])('%j → %j', (name, rel) => expect(normalizeEntryPath(name)).toBe(rel));

  it.each(['/etc/passwd', '../x', 'a/../b', 'a/..', 'a\0b', `${'x'.repeat(256)}`])('rejects %j', (name) => {
    expect(() => normalizeEntryPath(name)).toThrow(expect.objectContaining({ code: 'UNSAFE_ARCHIVE' }));
  });
});
