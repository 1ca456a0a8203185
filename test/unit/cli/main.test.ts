import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PassThrough } from 'node:stream';
import { runCli } from '../../../src/cli/main.js';
import { VERSION } from '../../../src/version.js';
import { systemClock } from '../../../src/host/clock.js';
import { recordingStream } from '../../support/cli.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentctl-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function cli(...args: string[]) {
  const stdout = recordingStream();
  const stderr = recordingStream();
  // Never the test runner's own stdin: on a developer's terminal a prompt would wait for an answer.
  const proc = { stdin: new PassThrough(), clock: systemClock, onInterrupt: () => () => undefined };
  const code = await runCli(['node', 'agentctl', ...args], { env: {}, cwd: dir, stdout, stderr, proc });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

describe('runCli exit codes', () => {
  it('--help and --version exit 0', async () => {
    expect((await cli('--help')).code).toBe(0);
    const v = await cli('--version');
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('a subcommand --help exits 0 and prints its usage', async () => {
    const r = await cli('stop', '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: agentctl stop');
  });

  it.each([
    [['--bogus', 'status']],
    [['status', '--bogus']],
    [['stop', '--bogus']],
    [['rpc']],
    [['nosuchcommand']],
    [['stop', '--grace', 'soon']],
    [['--timeout', 'x', 'status']],
  ])('usage error %j exits 2 and names the problem on stderr', async (args) => {
    const r = await cli(...args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bogus|method|nosuchcommand|--grace|--timeout/);
    // agentctl's name, not commander's "error:", starts the message.
    expect(r.stderr).toMatch(/^agentctl: /);
  });

  it('an unreachable daemon exits 3 and names the socket, whichever way --socket is spelled', async () => {
    const socket = path.join(dir, 'none.sock');
    for (const args of [
      ['--socket', socket, 'status'],
      [`--socket=${socket}`, 'status'],
      ['status', '--socket', socket],
    ]) {
      const r = await cli(...args);
      expect(r.code, args.join(' ')).toBe(3);
      expect(r.stderr, args.join(' ')).toContain(`cannot reach agentd on ${socket}`);
    }
  });

  it('AGENTD_SOCKET picks the socket', async () => {
    const socket = path.join(dir, 'env.sock');
    const stdout = recordingStream();
    const stderr = recordingStream();
    const code = await runCli(['node', 'agentctl', 'status'], {
      env: { AGENTD_SOCKET: socket },
      cwd: dir,
      stdout,
      stderr,
    });
    expect(code).toBe(3);
    expect(stderr.text()).toContain(socket);
  });

  it('--json prints the error as one JSON value on stdout too', async () => {
    const socket = path.join(dir, 'none.sock');
    const r = await cli('--socket', socket, '--json', 'status');
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { exitCode: 3, code: 'UNREACHABLE', socket } });
  });

  it('stop with no PID file is nothing to stop, exit 0', async () => {
    const r = await cli('--json', 'stop', '--pid-file', path.join(dir, 'none.pid'));
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ pidFilePresent: false, signalled: false });
  });

  it('version says that the daemon is unreachable, still with the client version: exit 3', async () => {
    const r = await cli('--socket', path.join(dir, 'none.sock'), '--json', 'version');
    expect(r.code).toBe(3);
    const v = JSON.parse(r.stdout) as {
      client: { version: string };
      daemon: unknown;
      daemonError: string;
      error: { code: string; exitCode: number; message: string };
    };
    expect(v.client.version).toBe(VERSION);
    expect(v.daemon).toBeNull();
    expect(v.daemonError).toContain('none.sock');
    expect(v.error).toMatchObject({ code: 'UNREACHABLE', exitCode: 3, reason: 'missing' });
    expect(r.stderr).toMatch(/^agentctl: cannot reach agentd on \S*none\.sock: /);
    const human = await cli('--socket', path.join(dir, 'none.sock'), 'version');
    expect(human.code).toBe(3);
    expect(human.stdout).toContain(`agentctl ${VERSION} (node `);
    expect(human.stdout).toMatch(/^agentd {3}unreachable/m);
    expect(human.stderr).toContain('cannot reach agentd on');
  });
});

describe('every command', () => {
  const leaves = [
    'status',
    'update',
    'reset',
    'drain',
    'uncordon',
    'ops list',
    'ops get',
    'ops wait',
    'ops cancel',
    'config show',
    'preflight',
    'fleet status',
    'fleet pause',
    'fleet resume',
    'rpc',
    'metrics',
    'stop',
    'uninstall',
    'version',
    'completion',
  ];

  it.each(leaves)('%s --help shows its usage and an example', async (command) => {
    const r = await cli(...command.split(' '), '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Usage: agentctl ${command}`);
    expect(r.stdout).toMatch(/Examples:\n {2}\$ agentctl|Examples:\n {2}\$ (sudo|source)/);
    // The global options are listed too (commander's showGlobalOptions), but not agentctl's own
    // --version, which a command does not take.
    expect(r.stdout).toContain('--json');
    expect(r.stdout).not.toContain('--version');
  });

  it('--version is listed in agentctl --help, the one place it is taken', async () => {
    expect((await cli('--help')).stdout).toContain('-V, --version');
    expect((await cli('ops', '--help')).stdout).not.toContain('--version');
    const r = await cli('status', '--version');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--version'");
  });

  it.each([
    [['ops', '--json', '--socket', 'S', 'list']],
    [['ops', 'list', '--json', '--socket', 'S']],
    [['ops', '--socket', 'S', 'wait', 'op-1', '--json']],
    [['config', '--json', 'show', '--socket', 'S']],
    [['fleet', '--socket', 'S', '--json', 'status']],
    [['fleet', 'status', '--socket', 'S', '--json']],
  ])('a group and its subcommands take the global options after their names: %j', async (args) => {
    const socket = path.join(dir, 'none.sock');
    const r = await cli(...args.map((a) => (a === 'S' ? socket : a)));
    expect(r.code, r.stderr).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: 'UNREACHABLE', socket } });
  });

  it('takes --json after its name', async () => {
    const r = await cli('stop', '--pid-file', path.join(dir, 'none.pid'), '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ pidFilePresent: false });
  });
});

describe('usage errors name the flag (exit 2)', () => {
  it.each([
    [['ops', 'list', '--limit', '0'], '--limit'],
    [['ops', 'list', '--state', 'bogus'], "option '--state <state>' argument 'bogus' is invalid"],
    [['ops', 'wait', 'op-1', '--timeout', 'x'], '--timeout'],
    [['drain', '--timeout', 'soon'], '--timeout'],
    [['completion', 'tcsh'], "'tcsh' is invalid"],
    [['ops', 'get'], "missing required argument 'id'"],
    [['update', '--config', 'x.yaml', '--image', 'r/i:1'], '--config cannot be combined'],
    [['update', '--config', 'missing.yaml'], '--config: cannot read'],
    [['reset'], 'pass --yes'],
    [['uninstall', '--host', 'systemd'], 'pass --yes'],
    [['uninstall', '--yes'], 'name it with --host systemd'],
    [['uninstall', '--grace', 'never', '--yes'], '--grace'],
  ])('%j', async (args, named) => {
    const r = await cli('--socket', path.join(dir, 'none.sock'), ...args);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(named);
  });

  it.each([
    [['update', '--kubernetes-verison', '1.35.0'], /unknown option '--kubernetes-verison'/],
    [['ops', 'get'], /missing required argument 'id'/],
    [['bogus-cmd'], /unknown command 'bogus-cmd'/],
    [[], /no command given/],
    [['status', '--bogus'], /unknown option '--bogus'/],
  ])('--json %j: exactly one JSON value on stdout for a commander usage error', async (args, message) => {
    const r = await cli('--socket', path.join(dir, 'none.sock'), '--json', ...args);
    expect(r.code).toBe(2);
    const value = JSON.parse(r.stdout) as { error: { code: string; exitCode: number; message: string } };
    expect(value.error).toMatchObject({ code: 'USAGE', exitCode: 2 });
    expect(value.error.message).toMatch(message);
  });

  it('--json puts the usage error on stdout as JSON', async () => {
    const r = await cli('--json', 'reset');
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { exitCode: 2, code: 'CONFIRMATION_REQUIRED' } });
  });
});

describe('completion', () => {
  it('prints a script; with --json it is wrapped in one JSON value', async () => {
    const r = await cli('completion', 'bash');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('\ncomplete -F _agentctl agentctl\n');
    const j = await cli('--json', 'completion', 'fish');
    expect(JSON.parse(j.stdout)).toMatchObject({
      shell: 'fish',
      script: expect.stringContaining('complete -c agentctl'),
    });
  });
});
