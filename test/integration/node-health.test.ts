/**
 * A node that is down looks down, and agentd heals what it can (issue 13), through the real
 * daemon on the simulated host: an update in which neither machine can start ends
 * ROLLBACK_FAILED with the failed target's diagnostics; status, the warning and
 * agentd_node_serving say the node does not serve while /readyz stays ready (it is about agentd);
 * a restart with repair on brings the active machine back as a `repair` operation. Every log
 * line binds each key once.
 */
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTempDir, waitUntil, type TestDaemon } from '../support/daemon.js';
import { linesWithDuplicateKeys } from '../support/log-lines.js';
import {
  metricValue,
  rpcResult,
  startSimDaemon,
  updateAndWait,
  type OperationView,
} from '../support/provision-fixtures.js';

interface Health {
  node: {
    activeMachine: string | null;
    serving: boolean;
    servingReason: string | null;
    warnings: string[];
    repair: { state: string } | null;
  };
}

describe('node health and repair through the daemon', () => {
  let dir: string;
  let d: TestDaemon | undefined;
  let logs = '';

  beforeAll(async () => {
    dir = await makeTempDir('agentd-health-');
    const first = await startSimDaemon({ dir });
    expect((await updateAndWait(first)).state).toBe('succeeded');
    logs += first.logs();
    await first.stop();
  });

  afterAll(async () => {
    await d?.dispose();
    // Made in beforeAll, outside any test: makeTempDir leaves it to us.
    await rm(dir, { recursive: true, force: true });
  });

  it('neither machine starts: ROLLBACK_FAILED with diagnostics; the node says it does not serve', async () => {
    // The cold order: kube1 stops before kube2 fails to boot, and then cannot boot again.
    d = await startSimDaemon({
      dir,
      env: { AGENTD_SIM_FAULTS: 'start-fails:*' },
      args: ['--no-repair', '--switch-order', 'cold'],
    });
    const op = await updateAndWait(d, { set: { kubernetesVersion: '1.35.0' } });
    expect(op.state).toBe('failed');
    expect(op.error?.code).toBe('ROLLBACK_FAILED');
    expect(op.phases.find((p) => p.name === 'start')?.error?.code).toBe('MACHINE_START_FAILED');
    expect(op.phases.find((p) => p.name === 'rollback')?.error?.code).toBe('ROLLBACK_FAILED');
    const diagnostics = op.error?.data?.diagnostics as Array<{ command: string; output: string }>;
    expect(diagnostics.map((x) => x.command)).toEqual([
      'systemd-run --machine=kube2 --pipe --wait journalctl -u kubelet.service -n 50 --no-pager',
      'systemd-run --machine=kube2 --pipe --wait journalctl -u containerd.service -n 50 --no-pager',
      'systemctl status systemd-nspawn@kube2.service --no-pager -n 20',
    ]);
    expect(diagnostics[2]?.output).toContain('Active: failed');

    const s = await rpcResult<Health>(d, 'status');
    expect(s.node).toMatchObject({ activeMachine: 'kube1', serving: false, repair: { state: 'off' } });
    expect(s.node.servingReason).toMatch(/kube1 is not running/);
    expect(s.node.warnings.join('\n')).toMatch(/the node is not serving/);
    expect(await metricValue(d, 'agentd_node_serving')).toBe(0);
    // /readyz is about agentd, which is ready.
    expect((await d.http('GET', '/readyz')).status).toBe(200);
    logs += d.logs();
    await d.stop();
  });

  it('agentd killed during a repair: the repair is not left running', async () => {
    // The first repair check runs as agentd turns ready: it may die before /readyz answers.
    d = await startSimDaemon({ dir, env: { AGENTD_FAILPOINTS: 'repair.start.before' }, waitReady: false });
    await d.waitExit();
    expect(d.proc.signalCode, d.logs()).toBe('SIGKILL');
    expect(d.logs()).toContain('failpoint repair.start.before');
    logs += d.logs();
  });

  it('a restart with repair on brings the active machine back, recorded as a repair operation', async () => {
    d = await startSimDaemon({ dir });
    const daemon = d;
    await waitUntil(
      'the node to serve again',
      async () => (await rpcResult<Health>(daemon, 'status')).node.serving,
      daemon,
    );
    const { operations } = await rpcResult<{ operations: OperationView[] }>(daemon, 'operations.list', {});
    // Newest first: the repair that healed the node, then the one agentd was killed in.
    const repairs = operations.filter((o) => o.kind === 'repair');
    expect(repairs.map((o) => o.state)).toEqual(['succeeded', 'interrupted']);
    expect(repairs[0]).toMatchObject({ from: 'kube1', to: 'kube1' });
    const killed = repairs[1] as OperationView;
    expect(killed.phases.map((p) => [p.name, p.state])).toEqual([
      ['start', 'failed'],
      ['verify', 'skipped'],
    ]);
    expect(killed.result?.recovery).toMatchObject({
      interruptedIn: 'start',
      activeMachine: 'kube1',
      actions: [],
      outcome: expect.stringContaining('repairs it if it still does not serve'),
    });
    expect(killed.error).toBeNull();
    expect(await metricValue(daemon, 'agentd_node_serving')).toBe(1);
    expect(await metricValue(daemon, 'agentd_machine_kubelet_state{machine="kube1",state="active"}')).toBe(1);
    logs += daemon.logs();
  });

  it('every log line binds each key once', () => {
    expect(logs).toContain('"subsystem":"machines"');
    expect(linesWithDuplicateKeys(logs)).toEqual([]);
  });
});
