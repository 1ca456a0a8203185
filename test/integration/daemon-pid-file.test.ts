/**
 * The PID file of the real daemon (docs/operations.md): a stale one is replaced, a live agentd's is
 * not, and a file that is not a PID file is refused and left alone.
 */
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { lstat, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  impossiblePid,
  makeTempDir,
  runAgentd,
  spawnFakeAgentd,
  spawnForeignProcess,
  startTestDaemon,
} from '../support/daemon.js';

async function startOver(content: string) {
  const dir = await makeTempDir();
  const pidFile = path.join(dir, 'agentd.pid');
  await writeFile(pidFile, content);
  const d = await startTestDaemon({ dir, pidFile });
  expect(await readFile(pidFile, 'utf8')).toBe(`${d.pid}\n`);
  expect(d.logs()).toContain('replacing a stale PID file');
  return d;
}

describe("a file that is not a PID file is not agentd's", () => {
  it('refused with exit 2 naming it, left untouched, and the refused start creates no state dir', async () => {
    const dir = await makeTempDir();
    const pidFile = path.join(dir, 'notes.txt');
    await writeFile(pidFile, 'this is not a pid\n');
    const config = path.join(dir, 'agentd-config.yaml');
    await writeFile(config, '');
    const stateDir = path.join(dir, 'new', 'state');
    const r = await runAgentd([
      '--config',
      config,
      '--socket',
      path.join(dir, 'agentd.sock'),
      '--pid-file',
      pidFile,
      '--state-dir',
      stateDir,
      '--root',
      path.join(dir, 'root'),
      '--host',
      'sim',
    ]);
    expect(r.timedOut).toBe(false);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(`--pid-file ${pidFile}: the file holds something other than a PID`);
    expect(await readFile(pidFile, 'utf8')).toBe('this is not a pid\n');
    expect(existsSync(path.join(dir, 'new'))).toBe(false);
  });
});

describe('a stale PID file is replaced', () => {
  it('a dead PID', async () => {
    await startOver(`${impossiblePid()}\n`);
  });

  it('the PID of another program, which is left alone', async () => {
    const sleeper = spawnForeignProcess();
    const d = await startOver(`${sleeper.pid}\n`);
    expect(sleeper.alive()).toBe(true);
    // And stopping the daemon does not touch it either.
    expect(await d.stop()).toBe(0);
    expect(sleeper.alive()).toBe(true);
  });
});

describe('a live agentd holds the PID file', () => {
  it('refuses to start with exit 1, naming the PID and the file, and changes nothing', async () => {
    const dir = await makeTempDir();
    const fake = await spawnFakeAgentd(dir);
    const pidFile = path.join(dir, 'agentd.pid');
    await writeFile(pidFile, `${fake.pid}\n`);
    const socket = path.join(dir, 'agentd.sock');
    // An empty config file of the test's own (not /dev/null, which need not be a device).
    const config = path.join(dir, 'agentd-config.yaml');
    await writeFile(config, '');
    const r = await runAgentd([
      '--config',
      config,
      '--socket',
      socket,
      '--pid-file',
      pidFile,
      '--state-dir',
      path.join(dir, 'state'),
      '--root',
      path.join(dir, 'root'),
      '--host',
      'sim',
    ]);
    expect(r.timedOut).toBe(false);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`pid ${fake.pid}`);
    expect(r.stderr).toContain(pidFile);
    expect(await readFile(pidFile, 'utf8')).toBe(`${fake.pid}\n`);
    expect(fake.alive()).toBe(true);
    // A refused start leaves no state dir behind.
    expect(existsSync(path.join(dir, 'state'))).toBe(false);
  });
});

describe('a PID file path that holds something else', () => {
  // `--pid-file /dev/null` once replaced the host's /dev/null with a regular file holding a PID.
  // A device node of our own in the temp dir stands in for it (creating one needs root, which the
  // system tests have; elsewhere a named pipe does).
  it('a device node, a pipe or a directory: exit 2 naming --pid-file, and the path is left as it was', async () => {
    const dir = await makeTempDir();
    const made: { path: string; is: (p: string) => Promise<boolean> }[] = [];
    const node = path.join(dir, 'null');
    if (process.getuid?.() === 0) {
      await execa('mknod', [node, 'c', '1', '3']);
      made.push({ path: node, is: async (p) => (await lstat(p)).isCharacterDevice() });
    }
    const fifo = path.join(dir, 'fifo');
    await execa('mkfifo', [fifo]);
    made.push({ path: fifo, is: async (p) => (await lstat(p)).isFIFO() });
    const sub = path.join(dir, 'subdir');
    await mkdir(sub);
    made.push({ path: sub, is: async (p) => (await lstat(p)).isDirectory() });
    for (const m of made) {
      const empty = path.join(dir, 'empty.yaml');
      await writeFile(empty, '');
      const r = await runAgentd([
        '--config',
        empty,
        '--socket',
        path.join(dir, 'agentd.sock'),
        '--pid-file',
        m.path,
        '--state-dir',
        path.join(dir, 'state'),
        '--root',
        path.join(dir, 'root'),
        '--host',
        'sim',
      ]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`--pid-file ${m.path}: the path is`);
      expect(await m.is(m.path)).toBe(true);
    }
  });
});
