/**
 * The third-party notices (scripts/notices.ts): every package among the bundles' inputs gets its
 * licence files, or the standard text of its declared licence when it ships none and that
 * licence names no more than its holder; a package with neither fails the build, naming it.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addNotice, bundledPackages, packageDirOf, renderNotices } from '../../../scripts/notices.js';
import { makeTempDir } from '../../support/daemon.js';

let root = '';
afterEach(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

async function pkg(
  dir: string,
  json: Record<string, unknown>,
  files: Record<string, string> = {},
): Promise<void> {
  await mkdir(path.join(root, dir), { recursive: true });
  await writeFile(path.join(root, dir, 'package.json'), JSON.stringify(json));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(root, dir, name), text);
}

describe('third-party notices', () => {
  it('finds the package of each bundled input, nested and scoped ones too, and none for our own', () => {
    expect(packageDirOf('node_modules/a/lib/x.js')).toBe('node_modules/a');
    expect(packageDirOf('node_modules/@s/b/index.js')).toBe('node_modules/@s/b');
    expect(packageDirOf('node_modules/a/node_modules/@s/c/x.js')).toBe('node_modules/a/node_modules/@s/c');
    expect(packageDirOf('src/bin/agentd.ts')).toBeNull();
    expect(packageDirOf('agentd-left-out:light-my-request')).toBeNull();
  });

  it('carries each package’s licence files, and the standard text for one that ships none', async () => {
    root = await makeTempDir('agentd-notices-');
    await pkg(
      'node_modules/a',
      { name: 'a', version: '1.0.0', license: 'ISC' },
      { LICENSE: 'ISC text of a\n' },
    );
    await pkg('node_modules/b', {
      name: 'b',
      version: '2.0.0',
      license: 'MIT',
      author: 'B Author <b@example.org>',
    });
    const got = await bundledPackages(root, [
      'node_modules/a/index.js',
      'node_modules/a/x.js',
      'node_modules/b/i.js',
      'src/x.ts',
    ]);
    expect(got.map((p) => [p.name, p.version, p.texts.length])).toEqual([
      ['a', '1.0.0', 1],
      ['b', '2.0.0', 1],
    ]);
    const text = addNotice(renderNotices(got), { title: 'Runtime 9', text: 'runtime licence' });
    expect(text).toContain('- a 1.0.0 (ISC)\n- b 2.0.0 (MIT)\n- Runtime 9\n');
    expect(text).toContain('ISC text of a');
    expect(text).toContain('Copyright (c) B Author <b@example.org>');
    expect(text.trimEnd().endsWith('runtime licence')).toBe(true);
  });

  it('fails, naming it, when a bundled package has no notice', async () => {
    root = await makeTempDir('agentd-notices-');
    await pkg(
      'node_modules/a',
      { name: 'a', version: '1.0.0', license: 'MIT' },
      { 'LICENSE.md': 'MIT text\n' },
    );
    await pkg('node_modules/c', { name: 'c', version: '3.0.0', license: 'BSD-3-Clause' });
    await expect(bundledPackages(root, ['node_modules/a/i.js', 'node_modules/c/i.js'])).rejects.toThrow(
      /bundled packages without a licence notice: c \(node_modules\/c, license "BSD-3-Clause"\)/,
    );
    // MIT without a holder to name is no notice either.
    await pkg('node_modules/d', { name: 'd', version: '4.0.0', license: 'MIT' });
    await expect(bundledPackages(root, ['node_modules/d/i.js'])).rejects.toThrow(
      /without a licence notice: d /,
    );
  });
});
