import { describe, expect, it } from 'vitest';
import { EntryPolicy } from '../../../../src/provision/tar/entry-policy.js';
import type { TarEntry, TarEntryKind } from '../../../../src/provision/tar/tar-reader.js';

async function* noBody(): AsyncGenerator<Buffer> {
  // no content
}

function entry(path: string, kind: TarEntryKind = 'file', linkname = ''): TarEntry {
  const typeflag = { file: '0', hardlink: '1', symlink: '2', directory: '5' }[kind as string] ?? 'S';
  return { path, kind, typeflag, mode: 0o644, uid: 0, gid: 0, size: 0, mtime: 0, linkname, body: noBody() };
}

function refusal(policy: EntryPolicy, e: TarEntry): string {
  try {
    policy.check(e);
  } catch (err) {
    expect((err as { code: string }).code).toBe('UNSAFE_ARCHIVE');
    return (err as { data: { reason: string } }).data.reason;
  }
  throw new Error(`expected ${e.path} to be refused`);
}

describe('EntryPolicy', () => {
  for (const layer of [true, false]) {
    describe(layer ? 'image layers' : 'artifact tarballs', () => {
      it('normalizes names and refuses absolute paths and ..', () => {
        const policy = new EntryPolicy({ layer });
        expect(policy.check(entry('./usr//bin/x'))).toEqual({ kind: 'file', rel: 'usr/bin/x' });
        expect(policy.check(entry('./', 'directory'))).toEqual({ kind: 'directory', rel: '' });
        expect(refusal(policy, entry('/etc/passwd'))).toContain('absolute');
        expect(refusal(policy, entry('a/../../x'))).toContain('".."');
        expect(refusal(policy, entry('.'))).toContain('target directory itself');
      });

      it('refuses device nodes, fifos and unknown entry types', () => {
        const policy = new EntryPolicy({ layer });
        for (const kind of ['char-device', 'block-device', 'fifo'] as const) {
          expect(refusal(policy, entry('dev/x', kind))).toContain(kind);
        }
        expect(refusal(policy, entry('sparse', 'other'))).toContain('unsupported entry type');
      });

      it('refuses entries and hardlink targets below a symlink of the same archive, until it is replaced', () => {
        const policy = new EntryPolicy({ layer });
        policy.check(entry('usr/lib', 'symlink', '/elsewhere'));
        expect(refusal(policy, entry('usr/lib/x'))).toContain('symlink');
        expect(refusal(policy, entry('usr/lib/deeper/x', 'directory'))).toContain('symlink');
        expect(refusal(policy, entry('h', 'hardlink', 'usr/lib/x'))).toContain('symlink');
        // a directory entry of the same name replaces the link: children are fine again
        policy.check(entry('usr/lib/', 'directory'));
        expect(policy.check(entry('usr/lib/x'))).toEqual({ kind: 'file', rel: 'usr/lib/x' });
      });

      it('refuses a directory turned into a symlink, and forgets links under a replaced directory', () => {
        const policy = new EntryPolicy({ layer });
        policy.check(entry('data/', 'directory'));
        policy.check(entry('data/inner', 'symlink', '/x'));
        policy.check(entry('data', 'symlink', '../outside'));
        expect(refusal(policy, entry('data/pwned'))).toContain('"data" is a symlink');
        policy.check(entry('data', 'file'));
        policy.check(entry('data/', 'directory'));
        // data/inner went with the directory it was in
        expect(policy.check(entry('data/inner/x'))).toEqual({ kind: 'file', rel: 'data/inner/x' });
      });

      it('refuses hardlinks out of the tree and symlinks with unusable targets', () => {
        const policy = new EntryPolicy({ layer });
        expect(refusal(policy, entry('l', 'hardlink', '../x'))).toContain('".."');
        expect(refusal(policy, entry('l', 'hardlink', '/etc/shadow'))).toContain('absolute');
        expect(refusal(policy, entry('l', 'hardlink', './'))).toContain('target directory itself');
        expect(refusal(policy, entry('s', 'symlink', ''))).toContain('empty');
        expect(policy.check(entry('s', 'symlink', '/absolute/is/fine'))).toEqual({
          kind: 'symlink',
          rel: 's',
        });
      });
    });
  }

  it('layers: .wh. names are whiteouts, also refused through a symlink', () => {
    const policy = new EntryPolicy({ layer: true });
    expect(policy.check(entry('etc/.wh.motd'))).toEqual({
      kind: 'whiteout',
      rel: 'etc/.wh.motd',
      victim: 'etc/motd',
    });
    expect(policy.check(entry('etc/.wh..wh..opq'))).toEqual({
      kind: 'opaque',
      rel: 'etc/.wh..wh..opq',
      dir: 'etc',
    });
    expect(policy.check(entry('.wh..wh..plnk'))).toEqual({ kind: 'none', rel: '.wh..wh..plnk' });
    expect(refusal(policy, entry('etc/.wh.'))).toContain('names no file');
    policy.check(entry('escape', 'symlink', '../outside'));
    expect(refusal(policy, entry('escape/.wh.secret'))).toContain('symlink');
    expect(refusal(policy, entry('escape/.wh..wh..opq'))).toContain('symlink');
  });

  it('layers: a hardlink may name a file of a lower layer', () => {
    const policy = new EntryPolicy({ layer: true });
    expect(policy.check(entry('bin/sh', 'hardlink', 'bin/bash'))).toEqual({
      kind: 'hardlink',
      rel: 'bin/sh',
      targetRel: 'bin/bash',
    });
  });

  it('artifacts: .wh. names are plain files; a hardlink must name an earlier file of the archive', () => {
    const policy = new EntryPolicy({ layer: false });
    expect(policy.check(entry('bin/.wh.x'))).toEqual({ kind: 'file', rel: 'bin/.wh.x' });
    expect(refusal(policy, entry('bin/b', 'hardlink', 'bin/a'))).toContain('not an earlier file');
    policy.check(entry('bin/a'));
    expect(policy.check(entry('bin/b', 'hardlink', 'bin/a'))).toEqual({
      kind: 'hardlink',
      rel: 'bin/b',
      targetRel: 'bin/a',
    });
    policy.check(entry('bin', 'symlink', '/elsewhere'));
    expect(refusal(policy, entry('c', 'hardlink', 'bin/a'))).toContain('symlink');
  });
});
