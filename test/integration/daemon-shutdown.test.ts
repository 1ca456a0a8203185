/**
 * Ordered shutdown of the real daemon (docs/operations.md): on SIGTERM, SIGINT or `agentctl stop` it
 * exits 0 and removes its socket and PID file, keeping the state dir.
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { startTestDaemon, type TestDaemon } from '../support/daemon.js';

/** Put something in the state dir that must survive the shutdown. */
async function markState(d: TestDaemon): Promise<string> {
  await mkdir(d.stateDir, { recursive: true });
  const marker = path.join(d.stateDir, 'keep-me');
  await writeFile(marker, 'journal');
  return marker;
}

async function expectCleanExit(d: TestDaemon, marker: string): Promise<void> {
  await expect(stat(d.socket)).rejects.toMatchObject({ code: 'ENOENT' });
  await expect(stat(d.pidFile)).rejects.toMatchObject({ code: 'ENOENT' });
  expect(await readFile(marker, 'utf8')).toBe('journal');
  const lines = d
    .logs()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; level: number });
  const msgs = lines.map((l) => l.msg);
  expect(msgs).toContain('agentd shutting down');
  expect(msgs.indexOf('agentd stopped')).toBeGreaterThan(msgs.indexOf('agentd shutting down'));
  // Nothing went wrong on the way down.
  expect(lines.filter((l) => l.level >= 50)).toEqual([]);
}

describe('shutdown', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s: exit 0, socket and PID file removed, state dir kept',
    async (signal) => {
      const d = await startTestDaemon();
      const marker = await markState(d);
      expect((await stat(d.pidFile)).isFile()).toBe(true);
      expect(await d.stop(signal)).toBe(0);
      await expectCleanExit(d, marker);
    },
  );

  it('agentctl stop --pid-file: exit 0 and the report says signalled', async () => {
    const d = await startTestDaemon();
    const marker = await markState(d);
    const r = await runAgentctl(['--json', 'stop', '--pid-file', d.pidFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      pidFilePresent: true,
      pidFile: d.pidFile,
      pid: d.pid,
      signalled: true,
      forceKilled: false,
      graceMs: 5000,
      operation: null,
    });
    // agentctl returns once the process is gone; collect its exit code.
    expect(await d.waitExit()).toBe(0);
    await expectCleanExit(d, marker);
  });

  it('agentctl stop in human form says it stopped, and a second stop finds nothing', async () => {
    const d = await startTestDaemon();
    const r = await runAgentctl(['stop', '--pid-file', d.pidFile]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`agentd (pid ${d.pid}) stopped`);
    expect(await d.waitExit()).toBe(0);
    const again = await runAgentctl(['stop', '--pid-file', d.pidFile]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('nothing to stop');
  });

  it('an open event stream does not hold the shutdown up', async () => {
    const d = await startTestDaemon();
    const streamClosed = new Promise<void>((resolve) => {
      http.get({ socketPath: d.socket, path: '/v1/events' }, (res) => {
        res.once('data', () => d.proc.kill('SIGTERM'));
        res.on('close', () => resolve());
        res.resume();
      });
    });
    await streamClosed;
    expect(await d.waitExit()).toBe(0);
    expect(d.logs()).toContain('agentd stopped');
  });
});
