// Why the fake API server (test/support/fake-kube): a server that is gone before the daemon starts (its port refuses connections); any stopped server would do, this one costs no control plane.
/**
 * With the Kubernetes API server unreachable (a `--kubeconfig` whose server refuses connections),
 * agentctl and the operation say so: `fleet status` prints what it could read and exits 1 with
 * KUBE_UNAVAILABLE, and an update waits in the fleet gate with a reason that names the API
 * server and the way on without the gate (docs/fleet.md). The real daemon (`--sim`) and the real
 * agentctl; needs `npm run build`.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { runAgentctl } from '../support/cli.js';
import { makeTempDir, startTestDaemon, waitUntil, type TestDaemon } from '../support/daemon.js';
import { startFakeKube } from '../support/fake-kube.js';
import { rpcResult } from '../support/provision-fixtures.js';

interface OperationView {
  id: string;
  state: string;
  wait?: { reason: string; message: string };
}

/** A joined `--sim` daemon whose kubeconfig names an API server that refuses connections. */
async function daemonWithDeadApi(): Promise<TestDaemon> {
  const kube = await startFakeKube();
  const dir = await makeTempDir('agentd-dead-api-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml());
  // Closed before agentd starts: its port now refuses every connection (ECONNREFUSED).
  await kube.close();
  const d = await startTestDaemon({ args: ['--sim', '--kubeconfig', kubeconfig] });
  onTestFinished(() => d.dispose());
  // The join: before it the node has no name, and no fleet gate (docs/fleet.md).
  expect((await rpcResult<OperationView>(d, 'update', { wait: true })).state).toBe('succeeded');
  return d;
}

describe('the API server unreachable', () => {
  it('fleet status prints what it read and exits 1 with KUBE_UNAVAILABLE, also with --json', async () => {
    const d = await daemonWithDeadApi();
    const human = await runAgentctl(['--socket', d.socket, 'fleet', 'status']);
    expect(human.stdout).toMatch(/^error {6}slots: .*ECONNREFUSED/m);
    expect(human.code).toBe(1);
    expect(human.stderr).toMatch(
      /^agentctl: the fleet status is incomplete: agentd could not read it from the Kubernetes API server \(slots: .*ECONNREFUSED/m,
    );
    const json = await runAgentctl(['--socket', d.socket, '--json', 'fleet', 'status']);
    expect(json.code).toBe(1);
    const v = JSON.parse(json.stdout) as {
      namespace: string;
      errors: string[];
      error: { code: string; exitCode: number; message: string; errors: string[] };
    };
    expect(v.namespace).toBe('agentd-system');
    expect(v.error).toMatchObject({ code: 'KUBE_UNAVAILABLE', exitCode: 1 });
    expect(v.error.errors).toEqual(v.errors);
    expect(v.errors.join('\n')).toContain('ECONNREFUSED');
  });

  it('an update waits for the API server, and its reason says how to go on without the gate', async () => {
    const d = await daemonWithDeadApi();
    const started = await rpcResult<OperationView>(d, 'update', { force: true, wait: false });
    let op: OperationView | null = null;
    await waitUntil(
      'the update to wait in the fleet gate with the read error',
      async () => {
        const s = await rpcResult<{ operation: OperationView | null }>(d, 'status');
        op = s.operation;
        return op?.wait?.message.includes('ECONNREFUSED') ?? false;
      },
      d,
    );
    const wait = (op as OperationView | null)?.wait;
    expect(wait?.reason).toBe('WaitingForSlot');
    expect(wait?.message).toMatch(
      /^waiting for the Kubernetes API server: cannot read the fleet policy: .*ECONNREFUSED.*; the update goes on once it answers\. To update this node without the fleet gate: agentctl ops cancel op-\S+, then agentctl update --ignore-fleet$/,
    );
    expect(wait?.message).toContain(`agentctl ops cancel ${started.id},`);
    // The way on it names works: cancel, then update without the gate.
    const cancel = await runAgentctl(['--socket', d.socket, 'ops', 'cancel', started.id]);
    expect(cancel.code, cancel.stderr).toBe(0);
    await waitUntil('the cancel to end the update', async () => {
      const s = await rpcResult<{ operation: OperationView | null }>(d, 'status');
      return s.operation === null;
    });
    const again = await runAgentctl(['--socket', d.socket, '--json', 'update', '--force', '--ignore-fleet'], {
      timeoutMs: 60_000,
    });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ state: 'succeeded' });
  });
});
