import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  inspectPidFile,
  isAgentdCmdline,
  processCmdline,
  removePidFile,
  writePidFile,
} from '../../../src/host/pid-file.js';
import { impossiblePid, spawnFakeAgentd, spawnForeignProcess } from '../../support/daemon.js';

let dir: string;
let pidFile: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-pid-'));
  pidFile = path.join(dir, 'agentd.pid');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('inspectPidFile', () => {
  it('absent: no file', async () => {
    expect(await inspectPidFile(pidFile)).toEqual({ kind: 'absent' });
  });

  it.each([
    ['words', 'hello'],
    ['empty', ''],
    ['negative', '-5'],
    ['pid 0', '0'],
    ['pid 1 (init is never agentd)', '1'],
    ['a float', '12.5'],
    ['two pids', '12 13'],
    ['too long', '12345678901'],
    // A PID file is a PID and a newline: a file that merely starts with digits is someone else's.
    ['digits then text', '123\nmy notes\n'],
  ])('garbage: %s', async (_name, content) => {
    await writeFile(pidFile, content);
    const state = await inspectPidFile(pidFile);
    expect(state.kind).toBe('garbage');
  });

  it('garbage keeps at most 64 characters of the content for the message', async () => {
    await writeFile(pidFile, 'x'.repeat(500));
    expect(await inspectPidFile(pidFile)).toEqual({ kind: 'garbage', content: 'x'.repeat(64) });
  });

  it('dead: a PID no process has', async () => {
    const pid = impossiblePid();
    await writeFile(pidFile, `${pid}\n`);
    expect(await inspectPidFile(pidFile)).toEqual({ kind: 'dead', pid });
  });

  it('foreign: a live process that is not agentd', async () => {
    const sleeper = spawnForeignProcess();
    await writeFile(pidFile, `${sleeper.pid}\n`);
    const state = await inspectPidFile(pidFile);
    expect(state).toEqual({ kind: 'foreign', pid: sleeper.pid, cmdline: 'sleep 30' });
    expect(sleeper.alive()).toBe(true);
  });

  it('agentd: a live process whose script is agentd.js', async () => {
    const fake = await spawnFakeAgentd(dir);
    await writeFile(pidFile, `  ${fake.pid}\n\n`);
    const state = await inspectPidFile(pidFile);
    expect(state.kind).toBe('agentd');
    expect(state).toMatchObject({ pid: fake.pid });
    expect(state.kind === 'agentd' && state.cmdline).toContain(path.join(dir, 'agentd.js'));
  });

  it('our own process is not agentd (the test runner)', async () => {
    await writeFile(pidFile, String(process.pid));
    expect((await inspectPidFile(pidFile)).kind).toBe('foreign');
  });

  it('reads command lines from the given proc directory', async () => {
    const proc = path.join(dir, 'proc');
    await mkdir(path.join(proc, '4242'), { recursive: true });
    await writeFile(path.join(proc, '4242', 'cmdline'), '/usr/local/bin/agentd\0--sim\0');
    await writeFile(pidFile, '4242');
    expect(await inspectPidFile(pidFile, proc)).toEqual({
      kind: 'agentd',
      pid: 4242,
      cmdline: '/usr/local/bin/agentd --sim',
    });
    expect(processCmdline(4243, proc)).toBeNull();
  });

  it('throws (does not call it absent) when the file cannot be read', async () => {
    await mkdir(pidFile);
    await expect(inspectPidFile(pidFile)).rejects.toThrow();
  });
});

describe('isAgentdCmdline', () => {
  it.each([
    ['agentd', true],
    ['/usr/bin/agentd --socket /run/agentd/agentd.sock', true],
    ['node /opt/agentd/dist/bin/agentd.js --sim', true],
    ['/usr/bin/node /x/agentd.js', true],
    ['node --enable-source-maps /x/agentd.js', true],
    ['sleep 30', false],
    ['node /x/agentctl.js stop', false],
    ['node /x/not-agentd.js', false],
    ['/usr/bin/agentd-helper', false],
    ['bash -c echo x y agentd', false],
    ['less /usr/bin/agentd', false],
    ['vim /opt/agentd/dist/bin/agentd.js', false],
    ['sudo /usr/local/bin/agentd', false],
    ['/usr/bin/node /x/agentctl.js agentd', false],
    ['node -e 0 /x/agentd.js', false],
    ['node --require /x/agentd.js other.js', false],
    ['nodejs /x/agentd.js', true],
    ['agentd.js --sim', true],
    ['', false],
  ])('%j → %s', (cmdline, expected) => {
    expect(isAgentdCmdline(cmdline)).toBe(expected);
  });
});

describe('writePidFile and removePidFile', () => {
  it('writes the PID and a newline, mode 0644', async () => {
    await writePidFile(pidFile, 12345);
    expect(await readFile(pidFile, 'utf8')).toBe('12345\n');
    expect((await stat(pidFile)).mode & 0o777).toBe(0o644);
  });

  it('replaces a stale PID file when asked to', async () => {
    await writeFile(pidFile, '99999\n');
    await writePidFile(pidFile, 777, 'replace');
    expect(await readFile(pidFile, 'utf8')).toBe('777\n');
  });

  it('creates only where nothing is (O_EXCL): an existing file is refused and left as it was', async () => {
    await writeFile(pidFile, 'my notes\n');
    await expect(writePidFile(pidFile, 777)).rejects.toMatchObject({ code: 'PRECONDITION_FAILED' });
    expect(await readFile(pidFile, 'utf8')).toBe('my notes\n');
    // No temp file is left behind either.
    expect((await readdir(dir)).sort()).toEqual(['agentd.pid']);
  });

  it('removes the file when it names our PID', async () => {
    await writePidFile(pidFile, 4242);
    await removePidFile(pidFile, 4242);
    await expect(stat(pidFile)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('leaves a file naming another PID (a newer daemon owns it)', async () => {
    await writePidFile(pidFile, 5151);
    await removePidFile(pidFile, 4242);
    expect(await readFile(pidFile, 'utf8')).toBe('5151\n');
  });

  it('leaves a garbage file, and does nothing when there is no file', async () => {
    await writeFile(pidFile, 'x');
    await removePidFile(pidFile, 4242);
    expect(await readFile(pidFile, 'utf8')).toBe('x');
    await removePidFile(path.join(dir, 'none.pid'), 4242);
  });
});
