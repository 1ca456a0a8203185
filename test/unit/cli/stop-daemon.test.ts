import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CliError, EXIT } from '../../../src/cli/exit-codes.js';
import { isProcessAlive, stopDaemonByPidFile } from '../../../src/cli/stop-daemon.js';
import { impossiblePid, spawnFakeAgentd, spawnForeignProcess } from '../../support/daemon.js';

let dir: string;
let pidFile: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-stop-'));
  pidFile = path.join(dir, 'agentd.pid');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A kill function that records every signal and never sends one. */
function recordingKill() {
  const sent: [number, NodeJS.Signals][] = [];
  return { sent, kill: (pid: number, signal: NodeJS.Signals) => void sent.push([pid, signal]) };
}

describe('stopDaemonByPidFile: nothing to stop', () => {
  it('no PID file', async () => {
    const k = recordingKill();
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 1000, kill: k.kill });
    expect(report).toEqual({
      pidFilePresent: false,
      pidFile,
      pid: null,
      signalled: false,
      forceKilled: false,
      note: `no PID file at ${pidFile}: nothing to stop`,
    });
    expect(k.sent).toEqual([]);
  });

  it('a PID file with garbage', async () => {
    await writeFile(pidFile, 'not a pid\n');
    const k = recordingKill();
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 1000, kill: k.kill });
    expect(report).toMatchObject({ pidFilePresent: true, pid: null, signalled: false, forceKilled: false });
    // Names the file, what it holds, and what to do.
    expect(report.note).toBe(
      `the PID file ${pidFile} does not hold a PID ("not a pid"): nothing was signalled; if agentd is running, stop it with systemctl stop agentd (or agentctl stop --pid-file naming its PID file); if not, remove ${pidFile}`,
    );
    expect(k.sent).toEqual([]);
  });

  it.each([
    ['1', 'pid 1 (init)'],
    ['0', 'pid 0,'],
  ])('a PID file naming %s: never signalled, and the note says why', async (content, named) => {
    await writeFile(pidFile, `${content}\n`);
    const k = recordingKill();
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 1000, kill: k.kill });
    expect(report).toMatchObject({ signalled: false, forceKilled: false });
    expect(report.note).toContain(`the PID file ${pidFile} names ${named}`);
    expect(report.note).toContain('which agentctl never signals');
    expect(report.note).toContain(`remove ${pidFile}`);
    expect(k.sent).toEqual([]);
  });

  it("a PID file naming agentctl's own process is never signalled, even when it looks like agentd", async () => {
    // A /proc where this very process is agentd: only the PID check can keep it from a signal.
    const procDir = path.join(dir, 'proc');
    await mkdir(path.join(procDir, String(process.pid)), { recursive: true });
    await writeFile(path.join(procDir, String(process.pid), 'cmdline'), '/usr/bin/agentd\0');
    await writeFile(pidFile, `${process.pid}\n`);
    const k = recordingKill();
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 50, pollMs: 10, kill: k.kill, procDir });
    expect(report).toMatchObject({ pid: process.pid, signalled: false, forceKilled: false });
    expect(report.note).toContain(
      `the PID file ${pidFile} names this agentctl (pid ${process.pid}), not agentd`,
    );
    expect(k.sent).toEqual([]);
  });

  it('a dead PID', async () => {
    const pid = impossiblePid();
    await writeFile(pidFile, `${pid}\n`);
    const k = recordingKill();
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 1000, kill: k.kill });
    expect(report).toMatchObject({ pidFilePresent: true, pid, signalled: false, forceKilled: false });
    expect(report.note).toContain('not running');
    expect(k.sent).toEqual([]);
  });

  it('a live process that is not agentd is never signalled (real kill)', async () => {
    const sleeper = spawnForeignProcess();
    await writeFile(pidFile, `${sleeper.pid}\n`);
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 1000 });
    expect(report).toMatchObject({
      pidFilePresent: true,
      pid: sleeper.pid,
      signalled: false,
      forceKilled: false,
    });
    expect(report.note).toContain('not agentd');
    expect(sleeper.alive()).toBe(true);
    expect(isProcessAlive(sleeper.pid)).toBe(true);
  });
});

describe('stopDaemonByPidFile: a live agentd', () => {
  it('one that exits on SIGTERM: signalled, not force-killed', async () => {
    const fake = await spawnFakeAgentd(dir);
    await writeFile(pidFile, `${fake.pid}\n`);
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 10_000, pollMs: 10 });
    expect(report).toEqual({
      pidFilePresent: true,
      pidFile,
      pid: fake.pid,
      signalled: true,
      forceKilled: false,
    });
    expect(await fake.exited).toEqual({ code: 0, signal: null });
  });

  it('one that ignores SIGTERM is SIGKILLed after the grace', async () => {
    const fake = await spawnFakeAgentd(dir, { ignoreSigterm: true });
    await writeFile(pidFile, `${fake.pid}\n`);
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 200, pollMs: 10 });
    expect(report).toEqual({
      pidFilePresent: true,
      pidFile,
      pid: fake.pid,
      signalled: true,
      forceKilled: true,
    });
    expect(await fake.exited).toEqual({ code: null, signal: 'SIGKILL' });
  });

  it('sends SIGTERM first, then SIGKILL, to the PID from the file', async () => {
    const fake = await spawnFakeAgentd(dir, { ignoreSigterm: true });
    await writeFile(pidFile, `${fake.pid}\n`);
    const k = recordingKill();
    const report = await stopDaemonByPidFile(pidFile, {
      graceMs: 30,
      pollMs: 10,
      kill: (pid, signal) => {
        k.kill(pid, signal);
        process.kill(pid, signal);
      },
    });
    expect(k.sent).toEqual([
      [fake.pid, 'SIGTERM'],
      [fake.pid, 'SIGKILL'],
    ]);
    expect(report.forceKilled).toBe(true);
  });

  it('a process that exits between the check and the signal is "nothing signalled"', async () => {
    const fake = await spawnFakeAgentd(dir);
    await writeFile(pidFile, `${fake.pid}\n`);
    const report = await stopDaemonByPidFile(pidFile, {
      graceMs: 1000,
      kill: () => {
        throw Object.assign(new Error('kill ESRCH'), { code: 'ESRCH' });
      },
    });
    expect(report).toMatchObject({ pid: fake.pid, signalled: false, forceKilled: false });
    expect(report.note).toContain('exited before');
  });

  it('expectPid: a PID file that names another agentd by now is not acted on', async () => {
    const fake = await spawnFakeAgentd(dir);
    await writeFile(pidFile, `${fake.pid}\n`);
    const k = recordingKill();
    const report = await stopDaemonByPidFile(pidFile, {
      graceMs: 1000,
      kill: k.kill,
      expectPid: fake.pid + 1,
    });
    expect(k.sent).toEqual([]);
    expect(report).toMatchObject({ pid: fake.pid, signalled: false });
    expect(report.note).toContain(`names pid ${fake.pid} now, not pid ${fake.pid + 1}`);
    // The one expected: signalled for real (it exits on SIGTERM).
    const same = await stopDaemonByPidFile(pidFile, {
      graceMs: 5000,
      expectPid: fake.pid,
      kill: (pid, signal) => {
        k.kill(pid, signal);
        process.kill(pid, signal);
      },
    });
    expect(k.sent).toEqual([[fake.pid, 'SIGTERM']]);
    expect(same.signalled).toBe(true);
  });
});

describe('stopDaemonByPidFile: errors that say what to do', () => {
  it('a PID file that cannot be read: PID_FILE_UNREADABLE naming it', async () => {
    await mkdir(pidFile);
    const err = await stopDaemonByPidFile(pidFile, { graceMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect(err).toMatchObject({
      exitCode: EXIT.FAILED,
      details: { code: 'PID_FILE_UNREADABLE', pidFile, errno: 'INVALID_CONFIG' },
    });
    expect((err as Error).message).toBe(
      `--pid-file ${pidFile}: the path is a directory; the PID file must be a regular file (or not exist yet); pass the PID file agentd writes with --pid-file`,
    );
  });

  it.each(['SIGTERM', 'SIGKILL'])(
    'an agentd that may not be signalled (EPERM on %s): PERMISSION_DENIED naming the PID and the file',
    async (refused) => {
      const fake = await spawnFakeAgentd(dir, { ignoreSigterm: true });
      await writeFile(pidFile, `${fake.pid}\n`);
      const err = await stopDaemonByPidFile(pidFile, {
        graceMs: 30,
        pollMs: 10,
        kill: (_pid, signal) => {
          if (signal === refused) throw Object.assign(new Error(`kill EPERM`), { code: 'EPERM' });
        },
      }).catch((e: unknown) => e);
      fake.proc.kill('SIGKILL');
      await fake.exited;
      expect(err).toBeInstanceOf(CliError);
      expect(err).toMatchObject({
        exitCode: EXIT.FAILED,
        details: { code: 'PERMISSION_DENIED', pid: fake.pid, pidFile },
      });
      expect((err as Error).message).toBe(
        `not allowed to signal agentd (pid ${fake.pid}, from ${pidFile}): it runs as another user; run agentctl as root (sudo) or as that user`,
      );
    },
  );
});

describe('isProcessAlive', () => {
  it('is true for this process and false for a PID nobody has', () => {
    expect(isProcessAlive(process.pid)).toBe(true);
    expect(isProcessAlive(impossiblePid())).toBe(false);
  });
});
