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

  it('rejects sparse pax entries, pax numbers that are not numbers, and a damaged or cut archive', async () => {
    const sparse = buildTar([
      { path: 'P', typeflag: 'x', content: '22 GNU.sparse.size=10\n' },
      { path: 'f', content: 'x' },
    ]);
    await expect(readAll(sparse)).rejects.toMatchObject({ code: 'UNSAFE_ARCHIVE' });
    const badUid = buildTar([
      { path: 'P', typeflag: 'x', content: '11 uid=x42\n' },
      { path: 'f', content: 'x' },
    ]);
    await expect(readAll(badUid)).rejects.toThrow(/pax uid="x42" is not a number/);
    const good = buildTar([{ path: 'f', content: 'x'.repeat(2000) }]);
    const damaged = Buffer.from(good);
    damaged[0] = 0x41; // the header's checksum no longer matches
    await expect(readAll(damaged)).rejects.toMatchObject({
      code: 'UNSAFE_ARCHIVE',
      message: expect.stringMatching(/the archive cannot be read: Invalid tar header/),
    });
    await expect(readAll(good.subarray(0, 1024))).rejects.toMatchObject({
      code: 'UNSAFE_ARCHIVE',
      message: expect.stringMatching(/Unexpected end of data/),
    });
  });

  it('passes the source’s own error on as it is, and stops reading when the consumer stops', async () => {
    const archive = buildTar([
      { path: 'a', content: 'x'.repeat(5000) },
      { path: 'b', content: 'y' },
    ]);
    async function* failing(): AsyncGenerator<Buffer> {
      yield archive.subarray(0, 512);
      throw new Error('gunzip: unexpected end of file');
    }
    await expect(readAll(failing())).rejects.toThrow(/^gunzip: unexpected end of file$/);
    let closed = false;
    async function* tracked(): AsyncGenerator<Buffer> {
      try {
        yield* chunked(archive, 512);
      } finally {
        closed = true;
      }
    }
    for await (const e of readTarEntries(tracked())) {
      // A consumer that leaves the body early and then the archive.
      for await (const _ of e.body) break;
      break;
    }
    await new Promise((r) => setImmediate(r));
    expect(closed).toBe(true);
  });
});

async function readAll(archive: Buffer | AsyncIterable<Buffer>): Promise<number> {
  let n = 0;
  const source = Buffer.isBuffer(archive) ? chunked(archive, 512) : archive;
  for await (const _ of readTarEntries(source)) n++;
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
