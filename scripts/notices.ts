/**
 * Third-party notices: the licence text of every package the bundles carry, generated at build
 * time from what esbuild actually put in them (its metafile's inputs), never from a list kept by
 * hand. scripts/build.ts writes them to dist/THIRD-PARTY-NOTICES; the release ships that file
 * with the embedded Node.js runtime's licence appended (scripts/release/release.ts), in the
 * tarball and as the .deb's /usr/share/doc/agentd/copyright.
 *
 * A package's notice is its licence files (LICENSE, LICENCE, COPYING, NOTICE, any extension).
 * A package that ships none gets the standard text of the licence its package.json declares
 * (for MIT with its author as the holder), where that licence is one of TEMPLATES; any other
 * package without a licence file fails the build, naming it.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

export const NOTICES_FILE = 'THIRD-PARTY-NOTICES';

export interface BundledPackage {
  name: string;
  version: string;
  /** The `license` field of its package.json. */
  license: string;
  /** Its directory, relative to the repository (`node_modules/…`). */
  dir: string;
  /** The licence texts, each with where it came from. */
  texts: Array<{ source: string; text: string }>;
}

const LICENCE_FILE = /^(licen[cs]e|copying|notice)([.-].*)?$/i;

/**
 * The standard text of a licence, for a package that ships no licence file: the MIT licence
 * names its holder (the package's author); the Unlicense names none.
 */
const TEMPLATES: Readonly<Record<string, (holder: string | null) => string | null>> = {
  Unlicense: () => `This is free and unencumbered software released into the public domain.

Anyone is free to copy, modify, publish, use, compile, sell, or distribute this software, either
in source code form or as a compiled binary, for any purpose, commercial or non-commercial, and by
any means.

In jurisdictions that recognize copyright laws, the author or authors of this software dedicate
any and all copyright interest in the software to the public domain. We make this dedication for
the benefit of the public at large and to the detriment of our heirs and successors. We intend
this dedication to be an overt act of relinquishment in perpetuity of all present and future
rights to this software under copyright law.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.

For more information, please refer to <https://unlicense.org/>
`,
  MIT: (holder) =>
    holder &&
    `The MIT License (MIT)

Copyright (c) ${holder}

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT
OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
`,
};

/**
 * The package directory of a bundled input (`node_modules/a/lib/x.js` → `node_modules/a`, the
 * innermost `node_modules/@scope/b` for a nested one), or null for the project's own files and
 * esbuild's virtual modules (`agentd-left-out:…`).
 */
export function packageDirOf(input: string): string | null {
  if (input.includes(':')) return null;
  const at = input.lastIndexOf('node_modules/');
  if (at < 0) return null;
  const parts = input.slice(at + 'node_modules/'.length).split('/');
  const name = parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1] ?? ''}` : parts[0];
  return name ? `${input.slice(0, at)}node_modules/${name}` : null;
}

type PackageJson = { name?: string; version?: string; license?: unknown; author?: unknown };

function holderOf(pkg: PackageJson): string | null {
  const a = pkg.author;
  if (typeof a === 'string' && a.trim() !== '') return a.trim();
  if (a && typeof a === 'object' && typeof (a as { name?: unknown }).name === 'string') {
    const { name, email } = a as { name: string; email?: unknown };
    return typeof email === 'string' ? `${name} <${email}>` : name;
  }
  return null;
}

/** Every package among `inputs` (paths relative to `root`), with its licence texts. */
export async function bundledPackages(root: string, inputs: Iterable<string>): Promise<BundledPackage[]> {
  const dirs = new Set<string>();
  for (const input of inputs) {
    const dir = packageDirOf(input);
    if (dir !== null) dirs.add(dir);
  }
  const packages: BundledPackage[] = [];
  const missing: string[] = [];
  for (const dir of [...dirs].sort()) {
    const abs = path.join(root, dir);
    const pkg = JSON.parse(await readFile(path.join(abs, 'package.json'), 'utf8')) as PackageJson;
    const license = typeof pkg.license === 'string' ? pkg.license : 'UNKNOWN';
    const texts: BundledPackage['texts'] = [];
    for (const file of (await readdir(abs)).filter((f) => LICENCE_FILE.test(f)).sort()) {
      texts.push({ source: file, text: (await readFile(path.join(abs, file), 'utf8')).trimEnd() });
    }
    const standard = texts.length === 0 ? (TEMPLATES[license]?.(holderOf(pkg)) ?? null) : null;
    if (standard !== null) {
      texts.push({
        source: `the ${license} licence its package.json declares (the package ships no licence file)`,
        text: standard.trimEnd(),
      });
    }
    const name = pkg.name ?? dir.slice(dir.lastIndexOf('node_modules/') + 'node_modules/'.length);
    if (texts.length === 0) missing.push(`${name} (${dir}, license ${JSON.stringify(license)})`);
    packages.push({ name, version: pkg.version ?? 'unknown', license, dir, texts });
  }
  if (missing.length > 0) {
    throw new Error(
      `bundled packages without a licence notice: ${missing.join(', ')}; add the licence's text to TEMPLATES in scripts/notices.ts or leave the package out`,
    );
  }
  return packages;
}

const RULE = '-'.repeat(78);

/** The notices file: a header, then each package (and each `extra`, such as the runtime) in turn. */
export function renderNotices(
  packages: readonly BundledPackage[],
  extra: ReadonlyArray<{ title: string; text: string }> = [],
): string {
  const parts = [
    'agentd includes the following third-party software, each under its own licence, whose text',
    'follows. agentd itself is under the Apache License 2.0 (LICENSE).',
    '',
    ...packages.map((p) => `- ${p.name} ${p.version} (${p.license})`),
    ...extra.map((e) => `- ${e.title}`),
  ];
  for (const p of packages) {
    parts.push('', RULE, `${p.name} ${p.version} (${p.license})`, RULE);
    for (const t of p.texts) parts.push('', `From ${t.source}:`, '', t.text);
  }
  for (const e of extra) parts.push('', RULE, e.title, RULE, '', e.text.trimEnd());
  return `${parts.join('\n')}\n`;
}

/**
 * `notices` (as renderNotices wrote it) with one more entry: listed after the packages, its text
 * last. For the runtime the release embeds, which the bundles' metafile does not see.
 */
export function addNotice(notices: string, entry: { title: string; text: string }): string {
  const listEnd = notices.indexOf(`\n\n${RULE}\n`);
  const head = listEnd < 0 ? notices.trimEnd() : notices.slice(0, listEnd);
  const rest = listEnd < 0 ? '' : notices.slice(listEnd).trimEnd();
  return `${head}\n- ${entry.title}${rest}\n\n${RULE}\n${entry.title}\n${RULE}\n\n${entry.text.trimEnd()}\n`;
}
