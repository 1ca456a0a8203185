/**
 * What a healthy node looks like on the real host, asserted from every side: systemd's
 * (`machinectl list`, the machines' units, kubelet inside the machine, the kubelet health
 * endpoint), the files (machines under /var/lib/machines, nspawn files, applied configs and
 * their sidecars) and agentd's own `status`.
 */
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import type { RealNode } from './node.js';
import { run } from './run.js';

export type MachineName = 'kube1' | 'kube2';
const MACHINES: MachineName[] = ['kube1', 'kube2'];
const other = (m: MachineName): MachineName => (m === 'kube1' ? 'kube2' : 'kube1');

/** An operation as `agentctl --json` prints it (only what these tests read). */
export interface OperationJson {
  id: string;
  kind: string;
  state: string;
  createdAt: string;
  from: MachineName | null;
  to: MachineName | null;
  result: Record<string, unknown> | null;
  error: { code: string; message: string; data?: Record<string, unknown> } | null;
  phases: Array<{ name: string; state: string; error?: { code: string; message: string } | null }>;
  recovery?: unknown;
}

export interface StatusJson {
  daemon: { state: string; pid: number };
  node: {
    activeMachine: MachineName | null;
    applied: { kubernetesVersion: string; image: string; hash: string } | null;
    machines: Array<{ name: MachineName; state: string; kubelet: string }>;
    warnings: string[];
    serving: boolean;
    observedAt: string | null;
  };
  operation: OperationJson | null;
  lastOperation: OperationJson | null;
}

/** Names of the machines machined lists as running (`machinectl list`). */
export async function runningMachines(node: RealNode): Promise<string[]> {
  const res = await node.host.execOk(['machinectl', 'list', '--no-legend', '--no-pager']);
  return res.stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((n) => n !== '')
    .sort();
}

async function exists(node: RealNode, p: string): Promise<boolean> {
  return (await node.host.exec(['test', '-e', p])).exitCode === 0;
}

/** The main PID of a unit in the host, as systemd reports it (`0` when it does not run). */
export async function unitMainPid(node: RealNode, unit: string): Promise<string> {
  return (await node.host.execOk(['systemctl', 'show', '-p', 'MainPID', '--value', unit])).stdout.trim();
}

/** `systemctl is-active` of a unit in the host (the word it prints). */
export async function unitState(node: RealNode, unit: string): Promise<string> {
  return (await node.host.exec(['systemctl', 'is-active', unit])).stdout.trim();
}

/**
 * Exactly `active` runs, verified by systemd and by agentd, its files are in place with a
 * sidecar that matches, and nothing of the other machine is left.
 */
export async function expectNode(
  node: RealNode,
  want: { active: MachineName; version?: string; image?: string },
): Promise<StatusJson> {
  const m = want.active;
  expect(await runningMachines(node)).toEqual([m]);
  expect(await unitState(node, `systemd-nspawn@${m}.service`)).toBe('active');
  expect(await unitState(node, `systemd-nspawn@${other(m)}.service`)).not.toBe('active');
  for (const unit of ['containerd.service', 'kubelet.service']) {
    const res = await node.host.exec([
      'systemd-run',
      `--machine=${m}`,
      '--pipe',
      '--wait',
      'systemctl',
      'is-active',
      unit,
    ]);
    expect(res.stdout.trim(), `${unit} in ${m}: ${res.stderr}`).toBe('active');
  }
  // The kubelet stand-in answers on the host's loopback: the machine shares its network.
  const [curl, ...curlArgs] = node.host.inNetns(['curl', '-s', 'http://127.0.0.1:10248/healthz']);
  expect((await run(curl as string, curlArgs)).stdout).toBe('ok');

  expect(await exists(node, `/var/lib/machines/${m}/usr/local/bin/kubelet`)).toBe(true);
  expect(await exists(node, `/var/lib/machines/${other(m)}`)).toBe(false);
  expect(await exists(node, `/etc/systemd/nspawn/${m}.nspawn`)).toBe(true);
  // Its next boot (a host reboot) is a normal one, and happens: never a standby boot, never off.
  const settings = await node.host.execOk(['cat', `/etc/systemd/nspawn/${m}.nspawn`]);
  expect(settings.stdout).not.toContain('agentd-standby.target');
  expect(
    (await node.host.exec(['systemctl', 'is-enabled', `systemd-nspawn@${m}.service`])).stdout.trim(),
  ).toBe('enabled');
  expect(await exists(node, `/etc/systemd/nspawn/${other(m)}.nspawn`)).toBe(false);
  expect(await exists(node, `/etc/systemd/system/systemd-nspawn@${other(m)}.service.d/override.conf`)).toBe(
    false,
  );

  const appliedPath = `/etc/unbounded/agent/${m}-applied-config.json`;
  const applied = await node.host.execOk(['cat', appliedPath]);
  const sidecar = await node.host.execOk(['cat', `${appliedPath}.sha256`]);
  expect(sidecar.stdout).toBe(`${createHash('sha256').update(applied.stdout).digest('hex')}\n`);
  const mode = await node.host.execOk(['stat', '-c', '%a', appliedPath]);
  expect(mode.stdout.trim()).toBe('600');
  expect(await exists(node, `/etc/unbounded/agent/${other(m)}-applied-config.json`)).toBe(false);
  const config = JSON.parse(applied.stdout) as { Cluster: { Version: string }; OCIImage: string };
  if (want.version) {
    expect(config.Cluster.Version).toBe(want.version);
    const kubelet = await node.host.execOk([`/var/lib/machines/${m}/usr/local/bin/kubelet`, '--version']);
    expect(kubelet.stdout.trim()).toBe(`Kubernetes v${want.version}`);
  }
  if (want.image) expect(config.OCIImage).toBe(want.image);

  const status = await node.agentctlJson<StatusJson>(['status']);
  expect(status.node.activeMachine).toBe(m);
  expect(status.node.machines.find((x) => x.name === m)).toMatchObject({
    state: 'running',
    kubelet: 'active',
  });
  if (want.version) expect(status.node.applied?.kubernetesVersion).toBe(want.version);
  return status;
}

/** Nothing of either machine is left: no machine, no unit running, no files. */
export async function expectNoMachines(node: RealNode): Promise<void> {
  expect(await runningMachines(node)).toEqual([]);
  for (const m of MACHINES) {
    expect(await unitState(node, `systemd-nspawn@${m}.service`)).not.toBe('active');
    expect(await exists(node, `/var/lib/machines/${m}`)).toBe(false);
    expect(await exists(node, `/etc/systemd/nspawn/${m}.nspawn`)).toBe(false);
    expect(await exists(node, `/etc/unbounded/agent/${m}-applied-config.json`)).toBe(false);
  }
}
