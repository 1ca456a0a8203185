/**
 * Read-your-writes through the real daemon: right after `agentctl update` (or an `update` with
 * `wait`, or `reset`) returns, the very next `status` shows its effect. Every host command takes
 * 400 ms here (`AGENTD_SIM_FAULTS=latency`), so the node re-read after an operation is slow:
 * status used to be answered from the snapshot taken before the operation ended, and showed no
 * active machine right after a join.
 */
import { describe, expect, it } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { startTestDaemon, type TestDaemon } from '../support/daemon.js';

interface StatusAnswer {
  node: { activeMachine: string | null; applied: { kubernetesVersion: string } | null };
  operation: unknown;
  lastOperation: { id: string; state: string } | null;
}

async function ctlStatus(d: TestDaemon): Promise<StatusAnswer> {
  const r = await runAgentctl(['--socket', d.socket, '--json', 'status']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as StatusAnswer;
}

describe('status right after an operation returns', () => {
  it('agentctl update (join, then an update), update with wait, and reset', async () => {
    const d = await startTestDaemon({ args: ['--sim'], env: { AGENTD_SIM_FAULTS: 'latency=400:*' } });

    const join = await runAgentctl(['--socket', d.socket, '--json', 'update'], { timeoutMs: 60_000 });
    expect(join.code, join.stderr).toBe(0);
    const joinOp = JSON.parse(join.stdout) as { id: string; state: string };
    expect(joinOp.state).toBe('succeeded');
    let s = await ctlStatus(d);
    expect(s.node.activeMachine).toBe('kube1');
    expect(s.node.applied?.kubernetesVersion).toBe('1.34.0');
    expect(s.operation).toBeNull();
    expect(s.lastOperation).toMatchObject({ id: joinOp.id, state: 'succeeded' });

    const up = (await d.rpc('update', { set: { kubernetesVersion: '1.35.0' }, wait: true })) as {
      result: { id: string; state: string };
    };
    expect(up.result.state).toBe('succeeded');
    const after = (await d.rpc('status')) as { result: StatusAnswer };
    expect(after.result.node.activeMachine).toBe('kube2');
    expect(after.result.node.applied?.kubernetesVersion).toBe('1.35.0');
    expect(after.result.lastOperation?.id).toBe(up.result.id);

    const reset = await runAgentctl(['--socket', d.socket, '--json', 'reset', '--yes'], {
      timeoutMs: 60_000,
    });
    expect(reset.code, reset.stderr).toBe(0);
    s = await ctlStatus(d);
    expect(s.node.activeMachine).toBeNull();
    expect(s.node.applied).toBeNull();
  }, 180_000);
});
