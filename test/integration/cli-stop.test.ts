/**
 * `agentctl stop` does not cut an operation short: it learns the daemon's --shutdown-grace and
 * its running operation from `status`, says it waits, and waits at least that long (unless
 * --force), so a daemon finishing a switch-over is not SIGKILLed after stop's own 5 s default.
 */
import { describe, expect, it } from 'vitest';
import { runAgentctl } from '../support/cli.js';
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
