/**
 * `agentctl stop` does not cut an operation short: it learns the daemon's --shutdown-grace and
 * its running operation from `status`, says it waits, and waits at least that long (unless
 * --force), so a daemon finishing a switch-over is not SIGKILLed after stop's own 5 s default.
 * And it signals only the agentd it is named: with --socket, the one on that socket, never the
 * one in the default PID file.
 */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PID_FILE } from '../../src/cli/paths.js';
import { runAgentctl } from '../support/cli.js';
import { makeTempDir, startTestDaemon, type TestDaemon } from '../support/daemon.js';
import { startSimDaemon, rpcResult } from '../support/provision-fixtures.js';

describe('agentctl stop and a running operation', () => {
  it('waits for the daemon (its grace, not --grace) and says what runs', async () => {
    // Every host command takes 400 ms: the join runs for seconds.
    const d = await startSimDaemon({
      env: { AGENTD_SIM_FAULTS: 'latency=400:*' },
      args: ['--shutdown-grace', '20s'],
    });
    const op = await rpcResult<{ id: string }>(d, 'update', {});
    const s = await rpcResult<{
      daemon: { shutdownGraceMs: number; host: string; root: string; pidFile: string };
    }>(d, 'status');
    expect(s.daemon).toMatchObject({
      shutdownGraceMs: 20_000,
      host: 'sim',
      root: d.root,
      pidFile: d.pidFile,
    });
    const r = await runAgentctl([
      '--socket',
      d.socket,
      '--json',
      'stop',
      '--pid-file',
      d.pidFile,
      '--grace',
      '100ms',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`agentd is running update ${op.id}.*waiting up to 25 s`));
    const report = JSON.parse(r.stdout) as {
      signalled: boolean;
      forceKilled: boolean;
      graceMs: number;
      operation: string;
    };
    expect(report).toMatchObject({ signalled: true, forceKilled: false, graceMs: 25_000 });
    expect(report.operation).toContain(op.id);
  });

  it('--force keeps --grace as given', async () => {
    const d = await startSimDaemon();
    const r = await runAgentctl([
      '--socket',
      d.socket,
      '--json',
      'stop',
      '--pid-file',
      d.pidFile,
      '--force',
      '--grace',
      '3s',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ signalled: true, graceMs: 3000, operation: null });
  });
});

/** Both daemons still run; then each is stopped by the test (exit 0). */
async function bothRunThenStop(a: TestDaemon, b: TestDaemon): Promise<void> {
  expect(a.proc.exitCode, a.logs()).toBeNull();
  expect(b.proc.exitCode, b.logs()).toBeNull();
  expect(await a.stop()).toBe(0);
  expect(await b.stop()).toBe(0);
}

// `a` runs with `--sim` alone, so its PID file is the default one of agentctl run from a.dir
// (./.agentd/agentd.pid); `b` has its own paths. Where /run/agentd/agentd.pid exists, that file
// would be the default instead: skipped there.
describe.skipIf(existsSync(DEFAULT_PID_FILE))('agentctl --socket X stop, without --pid-file', () => {
  async function twoDaemons(): Promise<{ a: TestDaemon; b: TestDaemon }> {
    const a = await startTestDaemon({ simDefaults: true });
    const b = await startSimDaemon();
    return { a, b };
  }

  it('stops the agentd on that socket, through the PID file it says it writes; the default one is not signalled', async () => {
    const { a, b } = await twoDaemons();
    const status = await rpcResult<{ daemon: { pid: number; pidFile: string } }>(b, 'status');
    expect(status.daemon).toMatchObject({ pid: b.pid, pidFile: b.pidFile });
    const r = await runAgentctl(['--socket', b.socket, '--json', 'stop'], { cwd: a.dir });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ pidFile: b.pidFile, pid: b.pid, signalled: true });
    expect(await b.waitExit()).toBe(0);
    expect(a.proc.exitCode, a.logs()).toBeNull();
    expect(await a.stop()).toBe(0);
  });

  it("refuses when the PID file does not name the agentd on the socket: garbage, or another agentd's", async () => {
    const { a, b } = await twoDaemons();
    await writeFile(b.pidFile, 'garbage\n');
    const garbage = await runAgentctl(['--socket', b.socket, '--json', 'stop'], { cwd: a.dir });
    expect(garbage.code, garbage.stderr).toBe(1);
    expect(JSON.parse(garbage.stdout)).toMatchObject({
      error: { code: 'PID_FILE_MISMATCH', pidFile: b.pidFile, found: 'garbage', pid: b.pid },
    });
    expect(garbage.stderr).toContain(
      `the agentd on --socket ${b.socket} is pid ${b.pid}, but the PID file ${b.pidFile} holds no PID ("garbage"): not signalled`,
    );
    // --pid-file naming the other daemon's file, with --socket naming this one: they disagree.
    const other = await runAgentctl(['--socket', b.socket, '--json', 'stop', '--pid-file', a.pidFile], {
      cwd: a.dir,
    });
    expect(other.code, other.stderr).toBe(1);
    expect(JSON.parse(other.stdout)).toMatchObject({
      error: { code: 'PID_FILE_MISMATCH', pidFile: a.pidFile, found: 'agentd', pid: b.pid },
    });
    expect(await readFile(b.pidFile, 'utf8')).toBe('garbage\n');
    await bothRunThenStop(a, b);
  });

  it('a --socket where no agentd runs: the agentd of the default PID file is not signalled', async () => {
    const { a, b } = await twoDaemons();
    const none = path.join(await makeTempDir(), 'none.sock');
    const r = await runAgentctl(['--socket', none, '--json', 'stop'], { cwd: a.dir });
    expect(r.code, r.stderr).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({
      error: { code: 'PID_FILE_MISMATCH', pidFile: a.pidFile, found: 'agentd', pid: null },
    });
    expect(r.stderr).toContain(`no agentd runs on --socket ${none}, but the PID file ${a.pidFile}`);
    await bothRunThenStop(a, b);
  });
});
