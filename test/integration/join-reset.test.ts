/**
 * Issue 3, end to end through the real daemon (`--sim`, explicit temp paths): a bare `update`
 * joins the node as `kube1` from the daemon's own mirror, a repeat is a no-op, `reset` removes
 * everything, and a second join comes from the artifact cache. Then a node taken over from the
 * upstream agent (an applied config and a rootfs, no agentd state) is seen as joined.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMirror } from '../../src/sim/mirror/index.js';
import { runAgentctl } from '../support/cli.js';
import { makeTempDir, type TestDaemon } from '../support/daemon.js';
import {
  appliedConfigPath,
  exists,
  metricValue,
  mirrorAgentConfig,
  nodeStatus,
  phaseOf,
  rpcResult,
  sha256Hex,
  snapshotTree,
  startSimDaemon,
  updateAndWait,
  withVersion,
  writeAppliedConfig,
} from '../support/provision-fixtures.js';

const run = promisify(execFile);

const JOIN_PHASES = {
  preflight: 'succeeded',
  provision: 'succeeded',
  stage: 'succeeded',
  // A join has no source to stand beside.
  standby: 'skipped',
  slot: 'skipped',
  drain: 'skipped',
  stop: 'skipped',
  start: 'succeeded',
  verify: 'succeeded',
  // No fleet policy: no health gate.
  health: 'skipped',
  commit: 'succeeded',
  cleanup: 'skipped',
  uncordon: 'skipped',
};

const ARTIFACT_BYTES = 'agentd_download_bytes_total{kind="artifact"}';
const ARTIFACT_HITS = 'agentd_download_cache_hits_total{kind="artifact"}';

async function modeOf(file: string): Promise<number> {
  return (await stat(file)).mode & 0o777;
}

describe('join and reset through the daemon', () => {
  let d: TestDaemon;
  let rootfs: string;
  let applied: string;

  beforeAll(async () => {
    d = await startSimDaemon();
    rootfs = path.join(d.root, 'var/lib/machines/kube1');
    applied = appliedConfigPath(d.root, 'kube1');
  });
  afterAll(async () => {
    await d?.dispose();
  });

  it('a bare update on a fresh node provisions, starts, verifies and commits kube1', async () => {
    const op = await updateAndWait(d);
    expect(op, JSON.stringify(op.error)).toMatchObject({
      kind: 'update',
      state: 'succeeded',
      from: null,
      to: 'kube1',
    });
    expect(Object.fromEntries(op.phases.map((p) => [p.name, p.state]))).toEqual(JOIN_PHASES);
    expect(op.result).toMatchObject({ changed: true, from: null, to: 'kube1' });

    // The applied config: pretty JSON (2 spaces), 0600, and a sidecar of its exact bytes.
    const bytes = await readFile(applied, 'utf8');
    const config = JSON.parse(bytes) as { MachineName: string; Cluster: { Version: string } };
    expect(bytes).toBe(`${JSON.stringify(config, null, 2)}\n`);
    expect(config).toMatchObject({ MachineName: 'sim-node', Cluster: { Version: '1.34.0' } });
    expect(await modeOf(applied)).toBe(0o600);
    expect(await readFile(`${applied}.sha256`, 'utf8')).toBe(`${sha256Hex(bytes)}\n`);
    expect(await modeOf(`${applied}.sha256`)).toBe(0o600);
    expect(op.result?.hash).toBe(sha256Hex(bytes));

    const status = await nodeStatus(d);
    expect(status.node).toMatchObject({
      activeMachine: 'kube1',
      applied: { kubernetesVersion: '1.34.0', hash: sha256Hex(bytes) },
      warnings: [],
    });
    expect(status.node.machines).toEqual([
      { name: 'kube1', state: 'running', kubelet: 'active' },
      { name: 'kube2', state: 'absent', kubelet: 'inactive' },
    ]);
    const shown = await rpcResult<{ machine: string; verified: boolean; hash: string; config: unknown }>(
      d,
      'config.get',
    );
    expect(shown).toMatchObject({ machine: 'kube1', verified: true, hash: sha256Hex(bytes) });
    expect(shown.config).toMatchObject({ Kubelet: { Auth: { BootstrapToken: '[REDACTED]' } } });

    // agentctl, as a user runs it, shows the joined node.
    const cli = await runAgentctl(['--socket', d.socket, '--json', 'status']);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ node: { activeMachine: 'kube1' } });

    // Provisioning runs through the task runner: each step is timed in its metric.
    for (const t of [
      'pull image',
      'install artifacts',
      'write OS files',
      'write nspawn files',
      'daemon-reload',
      'write staging files',
    ]) {
      expect(await metricValue(d, `agentd_task_duration_seconds_count{task="${t}",result="ok"}`), t).toBe(1);
    }
  });

  // On a join the whole config is new: its secrets must be redacted in result.changes too.
  it('the join operation never carries the bootstrap token', async () => {
    const { operations } = await rpcResult<{ operations: unknown[] }>(d, 'operations.list');
    expect(operations).toHaveLength(1);
    expect(JSON.stringify(operations)).not.toContain('simsim.0123456789abcdef');
    // Nor does the history on disk.
    const history = await snapshotTree(d.stateDir, { dirs: false });
    for (const file of Object.keys(history)) {
      expect(await readFile(path.join(d.stateDir, file), 'utf8'), file).not.toContain(
        'simsim.0123456789abcdef',
      );
    }
  });

  it('the kube1 rootfs has the image, the verified artifacts and the staged files', async () => {
    const { stdout } = await run(path.join(rootfs, 'usr/local/bin/kubelet'), ['--version']);
    expect(stdout.trim()).toBe('Kubernetes v1.34.0');
    expect(await readFile(path.join(rootfs, 'etc/os-release'), 'utf8')).toContain('ID=agentd-sim');
    for (const bin of [
      'kubectl',
      'kube-proxy',
      'containerd',
      'containerd-shim-runc-v2',
      'ctr',
      'runc',
      'crictl',
    ]) {
      expect(await modeOf(path.join(rootfs, 'usr/local/bin', bin)), bin).toBe(0o755);
    }
    for (const plugin of ['bridge', 'host-local', 'loopback', 'portmap']) {
      expect(await exists(path.join(rootfs, 'opt/cni/bin', plugin)), plugin).toBe(true);
    }
    expect(await readFile(path.join(rootfs, 'etc/containerd/config.toml'), 'utf8')).toContain(
      'SystemdCgroup = true',
    );
    for (const unit of ['containerd.service', 'kubelet.service', 'kubelet.service.d/10-agentd.conf']) {
      expect(await exists(path.join(rootfs, 'etc/systemd/system', unit)), unit).toBe(true);
    }
    const kubeconfig = path.join(rootfs, 'var/lib/kubelet/bootstrap-kubeconfig');
    expect(await modeOf(kubeconfig)).toBe(0o600);
    expect(await readFile(kubeconfig, 'utf8')).toContain('simsim.0123456789abcdef');
    expect(await exists(path.join(rootfs, 'etc/kubernetes/pki/apiserver-client-ca.crt'))).toBe(true);

    const nspawn = await readFile(path.join(d.root, 'etc/systemd/nspawn/kube1.nspawn'), 'utf8');
    expect(nspawn).toContain('VirtualEthernet=no');
    const dropIn = path.join(d.root, 'etc/systemd/system/systemd-nspawn@kube1.service.d/override.conf');
    expect(await readFile(dropIn, 'utf8')).toContain('ExecStartPre=-/usr/bin/machinectl terminate kube1');
  });

  it('a second join-equivalent update is a no-op that changes nothing', async () => {
    const before = await readFile(applied);
    const op = await updateAndWait(d);
    expect(op).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube1', phases: [] });
    expect(op.result).toMatchObject({ changed: false });
    expect(await readFile(applied)).toEqual(before);
    expect((await nodeStatus(d)).node.activeMachine).toBe('kube1');
  });

  it('reset stops and removes both machines, their nspawn files and applied configs', async () => {
    const op = await rpcResult<{ state: string; kind: string }>(d, 'reset', { wait: true });
    expect(op).toMatchObject({ kind: 'reset', state: 'succeeded' });
    for (const m of ['kube1', 'kube2'] as const) {
      expect(await exists(path.join(d.root, 'var/lib/machines', m)), m).toBe(false);
      expect(await exists(path.join(d.root, `etc/systemd/nspawn/${m}.nspawn`)), m).toBe(false);
      expect(await exists(path.join(d.root, `etc/systemd/system/systemd-nspawn@${m}.service.d`)), m).toBe(
        false,
      );
      expect(await exists(appliedConfigPath(d.root, m)), m).toBe(false);
      expect(await exists(`${appliedConfigPath(d.root, m)}.sha256`), m).toBe(false);
    }
    const status = await nodeStatus(d);
    expect(status.node).toMatchObject({ activeMachine: null, applied: null, warnings: [] });
    expect(status.node.machines.map((m) => m.state)).toEqual(['absent', 'absent']);
    const notFound = await d.rpc('config.get');
    expect(notFound).toMatchObject({ error: { data: { code: 'NOT_FOUND' } } });
  });

  it('joining again downloads no artifact byte: everything comes from the cache', async () => {
    const bytesBefore = await metricValue(d, ARTIFACT_BYTES);
    const hitsBefore = await metricValue(d, ARTIFACT_HITS);
    expect(bytesBefore).toBeGreaterThan(0);

    const op = await updateAndWait(d);
    expect(op).toMatchObject({ state: 'succeeded', to: 'kube1' });
    // 7 artifacts: kubelet, kubectl, kube-proxy, crictl, containerd, runc, CNI plugins.
    expect(op.result).toMatchObject({ cacheHits: 7 });
    // The image's layers are cached by digest too, so the whole provisioning fetched nothing.
    expect(op.result?.downloadedBytes).toBe(0);
    expect(await metricValue(d, ARTIFACT_BYTES)).toBe(bytesBefore);
    expect(await metricValue(d, ARTIFACT_HITS)).toBe(hitsBefore + 7);
    const { stdout } = await run(path.join(rootfs, 'usr/local/bin/kubelet'), ['--version']);
    expect(stdout.trim()).toBe('Kubernetes v1.34.0');
  });
});

describe('a node taken over from the upstream agent', () => {
  it('an applied config and a rootfs without any agentd state make kube1 the active machine', async () => {
    const mirror = await startMirror();
    try {
      const dir = await makeTempDir('agentd-takeover-');
      const root = path.join(dir, 'root');
      // What the upstream agent leaves: a rootfs, and the applied config with fields agentd
      // does not know (kept) and without Downloads (upstream does not persist them).
      await mkdir(path.join(root, 'var/lib/machines/kube1/etc'), { recursive: true });
      const upstream = {
        ...mirrorAgentConfig(mirror),
        Downloads: undefined,
        CRI: { Containerd: { Version: '2.0.4' }, Runc: { Version: '1.1.12' } },
        CNI: { PluginVersion: '1.5.1' },
        Attestation: { Enabled: false },
      };
      const written = await writeAppliedConfig(root, 'kube1', upstream);

      await mkdir(path.join(dir, 'agentd'));
      // --no-repair: this rootfs cannot boot, and a repair attempt would hold the node (BUSY).
      const d = await startSimDaemon({ dir: path.join(dir, 'agentd'), root, args: ['--no-repair'] });
      const status = await nodeStatus(d);
      expect(status.node).toMatchObject({
        activeMachine: 'kube1',
        applied: { kubernetesVersion: '1.34.0', hash: written.hash },
        // The truth about a taken-over machine that does not run (issue 13).
        warnings: ['the node is not serving: the active machine kube1 is not running'],
      });
      // Re-applying the applied config is a no-op: agentd does not repave a node it took over.
      const noop = await updateAndWait(d);
      expect(noop).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube1' });
      expect(noop.result).toMatchObject({ changed: false });
      expect(await readFile(written.file, 'utf8')).toBe(written.bytes);

      // And it updates like any node: blue/green to kube2, kube1 cleaned up.
      const op = await updateAndWait(d, { config: withVersion(mirrorAgentConfig(mirror), '1.35.0') });
      expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', from: 'kube1', to: 'kube2' });
      expect(phaseOf(op, 'cleanup').state).toBe('succeeded');
      expect(await exists(written.file)).toBe(false);
      expect(await exists(path.join(root, 'var/lib/machines/kube1'))).toBe(false);
      expect((await nodeStatus(d)).node).toMatchObject({
        activeMachine: 'kube2',
        applied: { kubernetesVersion: '1.35.0' },
      });
      await d.stop();
    } finally {
      await mirror.close();
    }
  });
});

describe('the try-out of the issue: npm start, then agentctl', () => {
  it('agentd --sim with no path flags joins through agentctl and resets again', async () => {
    const d = await startSimDaemon({ simDefaults: true });
    // agentctl run from the same directory finds ./.agentd/agentd.sock by itself.
    const cli = (args: string[]) => runAgentctl(['--json', ...args], { cwd: d.dir, timeoutMs: 30_000 });

    const update = await cli(['rpc', 'update', '{"wait":true}']);
    expect(update.code, update.stderr).toBe(0);
    expect(JSON.parse(update.stdout)).toMatchObject({ state: 'succeeded', to: 'kube1' });
    const applied = path.join(d.dir, '.agentd/root/etc/unbounded/agent/kube1-applied-config.json');
    const bytes = await readFile(applied);
    expect(await readFile(`${applied}.sha256`, 'utf8')).toBe(`${sha256Hex(bytes)}\n`);
    const status = await cli(['status']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      node: { activeMachine: 'kube1', applied: { hash: sha256Hex(bytes) } },
    });

    const reset = await cli(['rpc', 'reset', '{"wait":true}']);
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout)).toMatchObject({ kind: 'reset', state: 'succeeded' });
    expect(await exists(applied)).toBe(false);
    expect(await exists(path.join(d.dir, '.agentd/root/var/lib/machines/kube1'))).toBe(false);
    expect(JSON.parse((await cli(['status'])).stdout)).toMatchObject({ node: { activeMachine: null } });
    await d.stop();
  });
});
