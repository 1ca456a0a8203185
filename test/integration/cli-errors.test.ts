/** agentctl's exit codes when there is no daemon or the command line is wrong. */
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { makeTempDir } from '../support/daemon.js';

describe('agentctl without a daemon', () => {
  it('exit 3 and stderr names the socket', async () => {
    const dir = await makeTempDir();
    const socket = path.join(dir, 'agentd.sock');
    const r = await runAgentctl(['--socket', socket, 'status']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`cannot reach agentd on ${socket}`);
    expect(r.stderr).toContain('is agentd running?');
    expect(r.stdout).toBe('');
  });

  it('exit 3 with --json: the error as JSON on stdout', async () => {
    const dir = await makeTempDir();
    const socket = path.join(dir, 'agentd.sock');
    const r = await runAgentctl(['--json', `--socket=${socket}`, 'rpc', 'status']);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: 'UNREACHABLE', exitCode: 3, socket } });
    expect(r.stderr).toContain(socket);
  });

  it.each([
    ['update'],
    ['ops', 'list'],
    ['ops', 'wait', 'op-1'],
    ['drain'],
    ['config', 'show'],
    ['preflight'],
  ])('%s: exit 3 naming the socket', async (...command) => {
    const dir = await makeTempDir();
    const socket = path.join(dir, 'agentd.sock');
    const r = await runAgentctl(['--socket', socket, ...command]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`cannot reach agentd on ${socket}`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  // On a machine that really runs agentd the system socket wins; the fallback is not reachable there.
  it.skipIf(existsSync('/run/agentd/agentd.sock'))(
    'falls back to ./.agentd/agentd.sock (a --sim daemon) when only that exists',
    async () => {
      // No daemon listens there, but the message proves which socket agentctl picked.
      const dir = await makeTempDir();
      await mkdir(path.join(dir, '.agentd'));
      await writeFile(path.join(dir, '.agentd', 'agentd.sock'), '');
      const r = await runAgentctl(['status'], { cwd: dir });
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(path.join(dir, '.agentd', 'agentd.sock'));
    },
  );
});

describe('agentctl usage errors: exit 2 naming the problem', () => {
  it.each([
    [['--bogus', 'status'], "unknown option '--bogus'"],
    [['status', '--bogus'], "unknown option '--bogus'"],
    [['stop', '--grace', 'soon'], '--grace'],
    [['--timeout', 'soon', 'status'], '--timeout'],
    [['rpc'], "missing required argument 'method'"],
    [['frobnicate'], 'frobnicate'],
    [['update', '--bogus'], "unknown option '--bogus'"],
    [['update', '--kubernetes-version'], "option '--kubernetes-version <version>' argument missing"],
    [['drain', '--timeout', 'soon'], '--timeout: expected a duration'],
    [['ops', 'list', '--limit', 'many'], '--limit: expected a whole number'],
    [['ops', 'wait'], "missing required argument 'id'"],
    [['uninstall', '--grace', 'x', '--yes'], '--grace: expected a duration'],
    [['completion', 'powershell'], "'powershell' is invalid"],
  ])('%j', async (args, named) => {
    const r = await runAgentctl(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(named);
  });
});

describe('agentctl --json failures carry error.code (the built bundle)', () => {
  it.each([
    [['--timeout', '700h', 'status'], 'USAGE', 2, '--timeout: "700h" is too long: at most 596h'],
    [['--socket', '', 'status'], 'USAGE', 2, '--socket "" is empty'],
    [['help'], 'USAGE', 2, '--json: help is text only'],
    [['rpc', 'status', '{x'], 'USAGE', 2, 'PARAMS_JSON is not valid JSON'],
  ])('%j: %s', async (args, code, exitCode, message) => {
    const r = await runAgentctl(['--json', ...args]);
    expect(r.code).toBe(exitCode);
    const value = JSON.parse(r.stdout) as { error: { code: string; exitCode: number; message: string } };
    expect(value.error).toMatchObject({ code, exitCode });
    expect(value.error.message).toContain(message);
  });

  it('--version --json prints {"version": ...}', async () => {
    const r = await runAgentctl(['--version', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
  });

  it('a --socket that is a regular file: "not a socket", exit 3', async () => {
    const dir = await makeTempDir();
    const file = path.join(dir, 'agentd.sock');
    await writeFile(file, '');
    const r = await runAgentctl(['--json', '--socket', file, 'status']);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: 'UNREACHABLE', reason: 'not-socket' } });
    expect(r.stderr).toContain(`cannot reach agentd on ${file}: it is a regular file, not a socket`);
  });
});
