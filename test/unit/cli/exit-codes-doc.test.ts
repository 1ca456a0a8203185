/**
 * The exit codes docs/operations.md gives scripts agree with the code (docs/cli.md is generated
 * from it), and the `error.code` values agentctl gives itself are the ones docs/errors.md and the
 * exit-code table of docs/cli.md list, with the same exit codes.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI_ERROR_CODES, EXIT } from '../../../src/cli/exit-codes.js';

const REPO_ROOT = path.resolve(import.meta.dirname, '../../..');

describe('exit codes in docs/operations.md', () => {
  it('names every exit code of agentctl in the update section', async () => {
    const text = await readFile(path.join(REPO_ROOT, 'docs/operations.md'), 'utf8');
    const para = /Exit codes: ([\s\S]*?)\n\n/.exec(text)?.[1] ?? '';
    const named = [...para.matchAll(/`(\d+)` ([a-z]+)/g)].map((m) => [Number(m[1]), m[2]] as const);
    expect(new Map(named)).toEqual(
      new Map([
        [EXIT.OK, 'succeeded'],
        [EXIT.FAILED, 'failed'],
        [EXIT.USAGE, 'bad'],
        [EXIT.UNREACHABLE, 'agentd'],
        [EXIT.BUSY, 'another'],
        [EXIT.TIMEOUT, 'timed'],
        [EXIT.RETRY, 'try'],
        [EXIT.DETACHED, 'interrupted'],
      ]),
    );
  });

  it('gives the troubleshooting rows the codes agentctl exits with', async () => {
    const text = await readFile(path.join(REPO_ROOT, 'docs/operations.md'), 'utf8');
    expect(text).toContain(`did not answer in time\` (exit ${EXIT.TIMEOUT})`);
    expect(text).toContain(`\`UNAVAILABLE\` (exit ${EXIT.RETRY})`);
    const cli = await readFile(path.join(REPO_ROOT, 'docs/cli.md'), 'utf8');
    expect(cli).toMatch(
      new RegExp(
        `\\| \`${EXIT.TIMEOUT}\` \\| \`TIMEOUT\` \\| timed out: the daemon did not answer within --timeout`,
      ),
    );
  });
});

/** The rows of the "agentctl errors" table of docs/errors.md: code → exit status. */
function agentctlErrorRows(markdown: string): Map<string, number> {
  const section = markdown.split('\n## agentctl errors\n')[1] ?? '';
  const rows = new Map<string, number>();
  for (const line of section.split('\n')) {
    const m = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*`(\d+)`\s*\|/.exec(line);
    if (m) rows.set(m[1]!, Number(m[2]));
  }
  return rows;
}

/** Every `code: 'X'` that src/cli/ gives an error. */
async function codesUsedInSource(): Promise<Set<string>> {
  const root = path.join(REPO_ROOT, 'src/cli');
  const files = (await readdir(root, { recursive: true })).filter((f) => f.endsWith('.ts'));
  const codes = new Set<string>();
  for (const f of files) {
    const text = await readFile(path.join(root, f), 'utf8');
    for (const m of text.matchAll(/\bcode: '([A-Z][A-Z0-9_]*)'/g)) codes.add(m[1]!);
  }
  return codes;
}

describe("agentctl's own error codes", () => {
  it('are all in the agentctl errors table of docs/errors.md with their exit status, and nothing else is', async () => {
    const rows = agentctlErrorRows(await readFile(path.join(REPO_ROOT, 'docs/errors.md'), 'utf8'));
    expect(new Map([...rows].sort())).toEqual(new Map(Object.entries(CLI_ERROR_CODES).sort()));
  });

  it('include every code src/cli/ gives an error (so none goes undocumented)', async () => {
    const used = await codesUsedInSource();
    // The scan sees the codes (so an empty scan cannot pass).
    expect(used).toContain('USAGE');
    expect(used).toContain('HOST_REQUIRED');
    expect([...used].filter((c) => !(c in CLI_ERROR_CODES))).toEqual([]);
  });

  it('are listed in the exit-code table of docs/cli.md, each in the row of its exit code', async () => {
    const cli = await readFile(path.join(REPO_ROOT, 'docs/cli.md'), 'utf8');
    for (const [code, exit] of Object.entries(CLI_ERROR_CODES)) {
      const row = cli.split('\n').find((l) => l.startsWith(`| \`${exit}\` |`)) ?? '';
      expect(row.split(' | ').at(-1), code).toContain(`\`${code}\``);
    }
  });

  it('the table reader finds the rows of that section only (so the checks above can fail)', () => {
    const rows = agentctlErrorRows(
      [
        '| `BUSY` | 1001 | x |',
        '',
        '## agentctl errors',
        '',
        '| code | exit status |',
        '| `USAGE` | `2` | bad |',
        'The `TIMEOUT` code is prose.',
      ].join('\n'),
    );
    expect([...rows]).toEqual([['USAGE', 2]]);
  });
});
