import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { bashScript, fishScript, zshScript } from '../../../../src/cli/completion/scripts.js';
import { completionNodes, pathKind, type CompletionNode } from '../../../../src/cli/completion/spec.js';
import { buildProgram } from '../../../../src/cli/program.js';

/** In CI (AGENTD_REQUIRE_SYSTEM_TESTS=1) a missing shell fails these checks instead of skipping them. */
const REQUIRED = process.env.AGENTD_REQUIRE_SYSTEM_TESTS === '1';

const nullStream = (): NodeJS.WriteStream => new PassThrough() as unknown as NodeJS.WriteStream;
const nodes = completionNodes(
  buildProgram({ env: {}, cwd: '/', stdout: nullStream(), stderr: nullStream() }),
);
const ZSH_COMPLETE = fileURLToPath(new URL('./zsh-complete.zsh', import.meta.url));
const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;

/** A directory to complete names in: the files `afile`, `bfile` and the directory `adir` (with `k=v`). */
const cwd = mkdtempSync(path.join(os.tmpdir(), 'agentctl-completion-'));
writeFileSync(path.join(cwd, 'afile'), '');
writeFileSync(path.join(cwd, 'bfile'), '');
mkdirSync(path.join(cwd, 'adir'));
writeFileSync(path.join(cwd, 'adir', 'k=v'), '');
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

/**
 * What bash completes for the words typed so far (the last one is being completed), in `cwd`.
 * Words as bash splits them: `--config=x` is `--config`, `=`, `x`. File names come in no order.
 */
function bashComplete(...words: string[]): string[] {
  return bashCompleteWith(nodes, ...words);
}
function bashCompleteWith(tree: CompletionNode[], ...words: string[]): string[] {
  const script = `${bashScript(tree)}
COMP_WORDS=(agentctl ${words.map((w) => `'${w}'`).join(' ')})
COMP_CWORD=${words.length}
_agentctl
printf '%s\\n' "\${COMPREPLY[@]}"`;
  const r = spawnSync('bash', ['--norc', '--noprofile', '-c', script], { encoding: 'utf8', cwd });
  expect(r.stderr).toBe('');
  return r.stdout.split('\n').filter(Boolean);
}

/**
 * The names a real zsh offers (in a pty, with compinit: ./zsh-complete.zsh) for `line` typed and
 * TAB pressed, in `cwd`, with `script` as its _agentctl.
 */
function zshComplete(script: string, line: string): string[] {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agentctl-zsh-'));
  try {
    writeFileSync(path.join(dir, '_agentctl'), script);
    const r = spawnSync('zsh', ['-f', ZSH_COMPLETE, dir, cwd, path.join(dir, 'out'), line], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    // _files may offer a name twice (as a directory and as a file): once is enough here.
    return [...new Set(r.stdout.split('\n').filter(Boolean))].sort();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What fish completes for each line (`complete -C`), in `cwd`. */
function fishComplete(script: string, lines: string[]): string[][] {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'agentctl-fish-'));
  try {
    const file = path.join(dir, 'agentctl.fish');
    writeFileSync(file, script);
    const r = spawnSync(
      'fish',
      [
        '--no-config',
        '-c',
        [
          `source ${file}`,
          ...lines.map((l) => `complete -C ${JSON.stringify(l)} | string replace -r '\\t.*' ''; echo ==`),
        ].join('; '),
      ],
      { encoding: 'utf8', cwd },
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    return r.stdout
      .split('==\n')
      .slice(0, lines.length)
      .map((block) => block.split('\n').filter(Boolean).sort());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A tree with commands whose arguments are paths (agentctl has none today). */
const pathArgs = (): CompletionNode[] => {
  const program = new Command('agentctl');
  program.command('load').argument('<file>');
  program.command('into').argument('<dir>');
  program.command('show').argument('<id>');
  return completionNodes(program);
};

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

  it('knows which values and arguments are paths, from their names in the usage', () => {
    const pathOf = (p: string, name: string) =>
      nodes.find((n) => n.path === p)?.options.find((o) => o.names.includes(name))?.path;
    expect(pathOf('update', '--config')).toBe('files');
    expect(pathOf('preflight', '--config')).toBe('files');
    expect(pathOf('', '--socket')).toBe('files');
    expect(pathOf('ops list', '--socket')).toBe('files');
    expect(pathOf('stop', '--pid-file')).toBe('files');
    expect(pathOf('uninstall', '--root')).toBe('directories');
    expect(pathOf('uninstall', '--state-dir')).toBe('directories');
    for (const [p, o] of [
      ['', '--timeout'],
      ['update', '--image'],
      ['ops list', '--limit'],
      ['ops list', '--state'],
      ['uninstall', '--host'],
      ['status', '--json'],
    ] as const)
      expect(pathOf(p, o), `${p} ${o}`).toBeNull();
    // No agentctl argument is a path (ids, a method, JSON, a shell).
    expect(nodes.filter((n) => n.argumentPath !== null)).toEqual([]);
    expect(pathArgs().map((n) => [n.path, n.argumentPath])).toEqual([
      ['', null],
      ['load', 'files'],
      ['into', 'directories'],
      ['show', null],
    ]);
    expect(['file', 'path', 'pid-file', 'config_path', 'dir', 'state-dir'].map(pathKind)).toEqual([
      'files',
      'files',
      'files',
      'files',
      'directories',
      'directories',
    ]);
    expect(['duration', 'id', 'profile', 'directory-name', 'params_json'].map(pathKind)).toEqual([
      null,
      null,
      null,
      null,
      null,
    ]);
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

  it('offers file names only for a value or argument that is a path', () => {
    // Nothing after a command without operands, for an id, or for a value that is no path.
    expect(bashComplete('status', '')).toEqual([]);
    expect(bashComplete('ops', 'get', '')).toEqual([]);
    expect(bashComplete('--timeout', '')).toEqual([]);
    expect(bashComplete('update', '--image', '')).toEqual([]);
    // Files for a file, directories for a directory, also in the --opt=value form.
    expect(bashComplete('update', '--config', '').sort()).toEqual(['adir', 'afile', 'bfile']);
    expect(bashComplete('update', '--config', '=', 'b')).toEqual(['bfile']);
    expect(bashComplete('update', '--config', '=').sort()).toEqual(['adir', 'afile', 'bfile']);
    expect(bashComplete('--socket', '=', 'a').sort()).toEqual(['adir', 'afile']);
    expect(bashComplete('stop', '--pid-file', 'b')).toEqual(['bfile']);
    expect(bashComplete('uninstall', '--root', '')).toEqual(['adir']);
    expect(bashComplete('uninstall', '--state-dir', '=', 'a')).toEqual(['adir']);
    // Choices in that form too, and the command found after it.
    expect(bashComplete('ops', 'list', '--state', '=', 'ro')).toEqual(['rolled_back']);
    expect(bashComplete('--socket', '=', '/tmp/x.sock', 'sta')).toEqual(['status']);
    // Arguments that are paths (none of agentctl's today).
    expect(bashCompleteWith(pathArgs(), 'load', '').sort()).toEqual(['adir', 'afile', 'bfile']);
    expect(bashCompleteWith(pathArgs(), 'into', '')).toEqual(['adir']);
    expect(bashCompleteWith(pathArgs(), 'show', '')).toEqual([]);
    // And bash itself adds none when _agentctl offers nothing (no `-o default`).
    const r = spawnSync(
      'bash',
      ['--norc', '--noprofile', '-c', `${bashScript(nodes)}\ncomplete -p agentctl`],
      {
        encoding: 'utf8',
      },
    );
    expect(r.stdout.trim()).toBe('complete -F _agentctl agentctl');
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

  it.skipIf(!has('zsh') && !REQUIRED)(
    'zsh offers file names only for a value or argument that is a path',
    () => {
      const script = zshScript(nodes);
      // The harness sees what zsh offers: commands, and files where they belong.
      expect(zshComplete(script, 'agentctl up')).toEqual(['update']);
      expect(zshComplete(script, 'agentctl update --config ')).toEqual(['adir', 'afile', 'bfile']);
      // Nothing (not even an empty name) after a command without operands, for an id or a duration.
      expect(zshComplete(script, 'agentctl status ')).toEqual([]);
      expect(zshComplete(script, 'agentctl ops get ')).toEqual([]);
      expect(zshComplete(script, 'agentctl --timeout ')).toEqual([]);
      // Directories for a directory; the --opt=value form completes the value.
      expect(zshComplete(script, 'agentctl uninstall --root ')).toEqual(['adir']);
      expect(zshComplete(script, 'agentctl update --config=b')).toEqual(['bfile']);
      // Only the option's own = goes: a file name may have one too.
      expect(zshComplete(script, 'agentctl update --config=adir/k=')).toEqual(['k=v']);
      expect(zshComplete(script, 'agentctl uninstall --state-dir=')).toEqual(['adir']);
      expect(zshComplete(script, 'agentctl ops list --state=ro')).toEqual(['rolled_back']);
      expect(zshComplete(zshScript(pathArgs()), 'agentctl load ')).toEqual(['adir', 'afile', 'bfile']);
      expect(zshComplete(zshScript(pathArgs()), 'agentctl into ')).toEqual(['adir']);
      expect(zshComplete(zshScript(pathArgs()), 'agentctl show ')).toEqual([]);
    },
  );

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

  it.skipIf(!has('fish') && !REQUIRED)(
    'fish offers file names only for a value or argument that is a path',
    () => {
      expect(
        fishComplete(fishScript(nodes), [
          'agentctl status ',
          'agentctl ops get ',
          'agentctl --timeout ',
          'agentctl update --image ',
          'agentctl update --config ',
          'agentctl update --config=b',
          'agentctl stop --pid-file b',
          'agentctl uninstall --root ',
          'agentctl uninstall --state-dir=a',
          'agentctl ops list --state=ro',
        ]),
      ).toEqual([
        [],
        [],
        [],
        [],
        ['adir/', 'afile', 'bfile'],
        ['--config=bfile'],
        ['bfile'],
        ['adir/'],
        ['--state-dir=adir/'],
        ['--state=rolled_back'],
      ]);
      expect(
        fishComplete(fishScript(pathArgs()), ['agentctl load ', 'agentctl into ', 'agentctl show ']),
      ).toEqual([['adir/', 'afile', 'bfile'], ['adir/'], []]);
    },
  );

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
