import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
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
      note: 'no PID file: nothing to stop',
    });
    expect(k.sent).toEqual([]);
  });

  it('a PID file with garbage', async () => {
    await writeFile(pidFile, 'not a pid\n');
    const k = recordingKill();
    const report = await stopDaemonByPidFile(pidFile, { graceMs: 1000, kill: k.kill });
    expect(report).toMatchObject({ pidFilePresent: true, pid: null, signalled: false, forceKilled: false });
    expect(report.note).toContain('not a pid');
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
});

describe('isProcessAlive', () => {
  it('is true for this process and false for a PID nobody has', () => {
    expect(isProcessAlive(process.pid)).toBe(true);
    expect(isProcessAlive(impossiblePid())).toBe(false);
  });
});
