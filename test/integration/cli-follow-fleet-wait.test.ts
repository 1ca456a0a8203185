// Why the fake API server (test/support/fake-kube): no fault: the fleet policy changed at chosen moments, which kube-apiserver could do too; portable (test/cluster/fleet.test.ts pauses, without agentctl following).
/**
 * `agentctl update` shows why the update waits in the fleet gate (docs/fleet.md, docs/cli.md):
 * the real daemon (`--sim`) with `--kubeconfig` pointing at the fake API server, whose
 * `agentd-fleet` policy pauses the fleet and then closes its windows; the real agentctl follows.
 * Human follow output (stderr not a terminal: timestamped lines) gets a line per new reason, and
 * `--json` at a follow timeout (`ops wait --timeout`) prints the operation with its `wait`.
 * Needs `npm run build`.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { parsePolicy } from '../../src/fleet/policy.js';
import { AGENTCTL_BIN, runAgentctl } from '../support/cli.js';
import { childEnv, makeTempDir, startTestDaemon, waitUntil, type TestDaemon } from '../support/daemon.js';
import { startFakeKube, type FakeKube } from '../support/fake-kube.js';
import { rpcResult } from '../support/provision-fixtures.js';

const NS = 'agentd-system';

/** A daemon joined to its node, with a fleet policy in the fake API server from then on. */
async function setup(): Promise<{ kube: FakeKube; d: TestDaemon }> {
  const kube = await startFakeKube();
  onTestFinished(() => kube.close());
  const dir = await makeTempDir('agentd-fleet-wait-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml());
  const d = await startTestDaemon({ args: ['--sim', '--kubeconfig', kubeconfig] });
  onTestFinished(() => d.dispose());
  const join = await rpcResult<{ state: string }>(d, 'update', { wait: true });
  expect(join.state).toBe('succeeded');
  return { kube, d };
}

/** The policy, and wait until the daemon holds it (`fleet.status`). */
async function policy(kube: FakeKube, d: TestDaemon, text: string): Promise<void> {
  kube.putConfigMap(NS, 'agentd-fleet', { 'policy.yaml': text });
  const want = JSON.stringify(parsePolicy(text));
  await waitUntil(
    'the daemon to hold the policy',
    async () => JSON.stringify((await rpcResult<{ policy: unknown }>(d, 'fleet.status')).policy) === want,
    d,
  );
}

/** A window that is closed now: a one-hour window six hours from now, every day, in UTC. */
function closedWindow(): string {
  const at = (h: number): string => `${String((new Date().getUTCHours() + h) % 24).padStart(2, '0')}:00`;
  return `windows: [{days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "${at(6)}", end: "${at(7)}", timeZone: UTC}]`;
}

describe('agentctl update while the fleet gate holds the update', () => {
  it('prints why it waits, again when the reason changes, and ends once the gate opens', async () => {
    const { kube, d } = await setup();
    // No node registers in the fake API server: only the gate is under test, not the health gate.
    await policy(kube, d, 'paused: true\nhealthChecks: {nodeReady: false}\n');
    const proc = spawn(
      process.execPath,
      [AGENTCTL_BIN, '--socket', d.socket, 'update', '--kubernetes-version', '1.35.0'],
      { cwd: d.dir, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    let stdout = '';
    proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    proc.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((resolve) => proc.once('close', resolve));
    onTestFinished(() => {
      if (proc.exitCode === null) proc.kill('SIGKILL');
    });

    await waitUntil('the Paused line', async () => /waiting: Paused: /.test(stderr), d);
    expect(stderr).toMatch(
      /^\S+Z {2}waiting: Paused: the fleet policy says paused: true \(agentctl fleet resume\)$/m,
    );
    await policy(kube, d, `${closedWindow()}\nhealthChecks: {nodeReady: false}\n`);
    await waitUntil('the OutsideWindow line', async () => /waiting: OutsideWindow: /.test(stderr), d);
    expect(stderr).toMatch(
      /waiting: OutsideWindow: outside every maintenance window; the next opens at \S+Z$/m,
    );
    // Once per reason: the wait's line is not repeated while it holds.
    expect(stderr.match(/waiting: Paused/g)).toHaveLength(1);

    await policy(kube, d, 'healthChecks: {nodeReady: false}\n');
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/phase slot succeeded/);
    expect(stdout).toMatch(/succeeded/);
  });

  it('--json: ops wait at its --timeout prints the operation with its wait', async () => {
    const { kube, d } = await setup();
    await policy(kube, d, 'paused: true\nhealthChecks: {nodeReady: false}\n');
    const started = await runAgentctl(
      ['--socket', d.socket, '--json', 'update', '--kubernetes-version', '1.35.0', '--detach'],
      { cwd: d.dir },
    );
    expect(started.code).toBe(0);
    const { id } = JSON.parse(started.stdout) as { id: string };
    const r = await runAgentctl(['--socket', d.socket, '--json', 'ops', 'wait', id, '--timeout', '3s'], {
      cwd: d.dir,
      timeoutMs: 30_000,
    });
    expect(r.code).toBe(5);
    const op = JSON.parse(r.stdout) as { state: string; wait?: { reason: string; message: string } };
    expect(op.state).toBe('running');
    expect(op.wait).toMatchObject({ reason: 'Paused', message: expect.stringContaining('paused: true') });
    // Progress on stderr (not a terminal) carries it too.
    expect(r.stderr).toMatch(/waiting: Paused: /);
    await rpcResult(d, 'fleet.resume');
  });
});
