import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { bashScript, fishScript, zshScript } from '../../../../src/cli/completion/scripts.js';
import { completionNodes } from '../../../../src/cli/completion/spec.js';
import { buildProgram } from '../../../../src/cli/program.js';

/** In CI (AGENTD_REQUIRE_SYSTEM_TESTS=1) a missing shell fails these checks instead of skipping them. */
const REQUIRED = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';

const nullStream = (): NodeJS.WriteStream => new PassThrough() as unknown as NodeJS.WriteStream;
const nodes = completionNodes(
  buildProgram({ env: {}, cwd: '/', stdout: nullStream(), stderr: nullStream() }),
);
const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;

/** What bash completes for the words typed so far (the last one is being completed). */
function bashComplete(...words: string[]): string[] {
  const script = `${bashScript(nodes)}
COMP_WORDS=(agentctl ${words.map((w) => `'${w}'`).join(' ')})
COMP_CWORD=${words.length}
_agentctl
printf '%s\\n' "\${COMPREPLY[@]}"`;
  const r = spawnSync('bash', ['--norc', '--noprofile', '-c', script], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  return r.stdout.split('\n').filter(Boolean);
}

describe('completion spec', () => {
  it('has every command path, with global options inherited and own options winning', () => {
    const paths = nodes.map((n) => n.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        '',
        'status',
        'update',
        'drain',
        'ops',
        'ops list',
        'ops wait',
        'config show',
        'completion',
      ]),
    );
    const drain = nodes.find((n) => n.path === 'drain');
    const timeouts = drain?.options.filter((o) => o.names.includes('--timeout'));
    expect(timeouts).toHaveLength(1);
    expect(timeouts?.[0]?.description).toContain('evicting');
    // --version is agentctl's own: offered at the top level only.
    const names = (p: string) => nodes.find((n) => n.path === p)?.options.flatMap((o) => o.names);
    expect(names('')).toContain('--version');
    for (const p of ['status', 'ops', 'ops list', 'fleet status'])
      expect(names(p), p).not.toContain('--version');
    expect(nodes.find((n) => n.path === 'completion')?.argumentChoices).toEqual(['bash', 'zsh', 'fish']);
    // Hidden options are not offered.
    expect(nodes.find((n) => n.path === 'uninstall')?.options.flatMap((o) => o.names)).not.toContain(
      '--systemd',
    );
  });
});

describe('bash completion', () => {
  it('completes commands, subcommands, options and choices', () => {
    expect(bashComplete('up')).toEqual(['update']);
    expect(bashComplete('ops', '')).toEqual(expect.arrayContaining(['list', 'get', 'wait', 'cancel']));
    expect(bashComplete('ops', 'list', '--st')).toEqual(['--state']);
    expect(bashComplete('ops', 'list', '--state', 'ro')).toEqual(['rolled_back']);
    expect(bashComplete('completion', '')).toEqual(['bash', 'zsh', 'fish']);
    expect(bashComplete('update', '--dr')).toEqual(['--drain', '--dry-run']);
  });

  it('skips option values when finding the command', () => {
    expect(bashComplete('--socket', '/tmp/x.sock', 'sta')).toEqual(['status']);
    expect(bashComplete('--timeout', '5s', 'ops', 'ca')).toEqual(['cancel']);
  });

  it('offers global options after a command too', () => {
    expect(bashComplete('status', '--js')).toEqual(['--json']);
  });
});

describe('zsh and fish scripts', () => {
  it('zsh: a #compdef function using the same tables', () => {
    const script = zshScript(nodes);
    expect(script.startsWith('#compdef agentctl\n')).toBe(true);
    expect(script).toContain(
      "'ops list|--state') echo 'pending running succeeded failed rolled_back cancelled interrupted' ;;",
    );
    expect(script).toContain("'update:start an update");
  });

  it.skipIf(!has('zsh') && !REQUIRED)('zsh parses it', () => {
    const r = spawnSync('zsh', ['-n'], { input: zshScript(nodes), encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('fish: complete lines per command path', () => {
    const script = fishScript(nodes);
    expect(script).toContain(
      "complete -c agentctl -f -n '__agentctl_at \\'ops\\'' -a 'list' -d 'operations, newest first'",
    );
    expect(script).toMatch(/-n '__agentctl_at \\'update\\'' -l config -r -F -d/);
  });

  it.skipIf(!has('fish') && !REQUIRED)('fish loads it without a complaint, and it completes', () => {
    // `fish -n` only parses: a `complete` line fish refuses (-f with -F) shows only when it runs.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'agentctl-fish-'));
    const file = path.join(dir, 'agentctl.fish');
    writeFileSync(file, fishScript(nodes));
    const complete = (line: string): string =>
      `complete -C ${JSON.stringify(line)} | string replace -r '\\t.*' ''; echo ==`;
    const r = spawnSync(
      'fish',
      [
        '--no-config',
        '-c',
        [
          `source ${file}`,
          complete('agentctl ops l'),
          complete('agentctl ops list --state ro'),
          complete('agentctl --vers'),
          complete('agentctl status --vers'),
          complete(`agentctl update --config ${path.join(dir, 'agentctl.f')}`),
        ].join('; '),
      ],
      { encoding: 'utf8' },
    );
    rmSync(dir, { recursive: true, force: true });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout.split('==\n').map((block) => block.trim())).toEqual([
      'list',
      'rolled_back',
      '--version',
      // Only agentctl itself takes --version.
      '',
      // The value of --config is a file.
      file,
      '',
    ]);
  });

  it.skipIf(!has('fish') && !REQUIRED)('fish parses it', () => {
    // fish reads a script from a file more reliably than from a pipe (3.6 rejects stdin here).
    const dir = mkdtempSync(path.join(os.tmpdir(), 'agentctl-fish-'));
    const file = path.join(dir, 'agentctl.fish');
    writeFileSync(file, fishScript(nodes));
    const r = spawnSync('fish', ['--no-execute', file], { encoding: 'utf8' });
    rmSync(dir, { recursive: true, force: true });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
