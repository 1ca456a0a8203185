/** The exit codes docs/operations.md gives scripts agree with the code (docs/cli.md is generated from it). */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT } from '../../../src/cli/exit-codes.js';

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
