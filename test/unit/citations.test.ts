/**
 * The repository explains itself: comments and user-visible texts cite the project's own docs/
 * (which must exist), never design documents that are not part of the repository.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SCANNED = ['src', 'docs', 'openapi', 'deploy', 'systemd', 'bench', 'README.md'];
const OUTSIDE = /DESIGN(\.md)? ?§|DESIGN\.md|UPSTREAM\.md|CONVENTIONS\.md|REAL-HOST\.md|\.\.\/shared\//;

async function files(entry: string): Promise<string[]> {
  const full = path.join(ROOT, entry);
  if (!existsSync(full)) return [];
  if (!entry.includes('.') || (await readdir(full).catch(() => null)) !== null) {
    const out: string[] = [];
    for (const d of await readdir(full, { withFileTypes: true })) {
      const rel = path.join(entry, d.name);
      if (d.isDirectory()) out.push(...(await files(rel)));
      else out.push(rel);
    }
    return out;
  }
  return [entry];
}

describe('citations', () => {
  it('cite docs/ of this repository, never documents outside it', async () => {
    const all = (await Promise.all(SCANNED.map(files))).flat();
    const outside: string[] = [];
    const missing: string[] = [];
    for (const file of all) {
      const text = await readFile(path.join(ROOT, file), 'utf8');
      text.split('\n').forEach((line, i) => {
        if (OUTSIDE.test(line)) outside.push(`${file}:${i + 1}: ${line.trim()}`);
        for (const m of line.matchAll(/\bdocs\/([a-z0-9-]+\.md)/g)) {
          if (!existsSync(path.join(ROOT, 'docs', m[1] ?? '')))
            missing.push(`${file}:${i + 1}: docs/${m[1]}`);
        }
      });
    }
    expect(outside).toEqual([]);
    expect(missing).toEqual([]);
  });
});
