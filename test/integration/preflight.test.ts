/**
 * `preflight` through the real daemon (docs/architecture.md): the checks of an update — config, every
 * artifact and the image reachable, disk space — with no side effect at all: the root and the
 * state dir are identical before and after, byte for byte and directory for directory.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMirror, type Mirror } from '../../src/sim/mirror/index.js';
import type { TestDaemon } from '../support/daemon.js';
import {
  SIM_HOST_STATE,
  TEST_IMAGE_REPOSITORY,
  mirrorAgentConfig,
  rpcResult,
  snapshotTree,
  startSimDaemon,
  updateAndWait,
  withVersion,
} from '../support/provision-fixtures.js';

interface PreflightView {
  ok: boolean;
  config: Record<string, unknown>;
  checks: Array<{ name: string; ok: boolean; message: string }>;
}

const ARTIFACT_CHECKS = [
  'artifact:kubelet',
  'artifact:kubectl',
  'artifact:kube-proxy',
  'artifact:crictl',
  'artifact:containerd',
  'artifact:runc',
  'artifact:cni-plugins',
];

describe('preflight', () => {
  let mirror: Mirror;
  let d: TestDaemon;

  beforeAll(async () => {
    mirror = await startMirror();
    d = await startSimDaemon();
  });
  afterAll(async () => {
    await d?.dispose();
    await mirror?.close();
  });

  /** Run preflight and prove that it changed nothing under the root or the state dir. */
  async function preflight(params?: unknown): Promise<PreflightView> {
    // The simulated machined's own bookkeeping is not a host file agentd writes.
    const root = await snapshotTree(d.root, { ignore: [SIM_HOST_STATE] });
    const state = await snapshotTree(d.stateDir);
    const result = await rpcResult<PreflightView>(d, 'preflight', params);
    expect(await snapshotTree(d.root, { ignore: [SIM_HOST_STATE] })).toEqual(root);
    expect(await snapshotTree(d.stateDir)).toEqual(state);
    return result;
  }

  it('passes for the sim default config on a fresh node, creating nothing', async () => {
    const r = await preflight();
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.checks.map((c) => c.name)).toEqual(['config', ...ARTIFACT_CHECKS, 'image', 'disk-space']);
    expect(r.config).toMatchObject({
      MachineName: 'sim-node',
      Kubelet: { Auth: { BootstrapToken: '[REDACTED]' } },
    });
  });

  it('a Kubernetes version the mirror does not have fails the kube artifact checks, naming it', async () => {
    const r = await preflight({ config: withVersion(mirrorAgentConfig(mirror), '99.0.0') });
    expect(r.ok).toBe(false);
    const failed = r.checks.filter((c) => !c.ok);
    // crictl follows the Kubernetes minor (99.0.0) too; containerd, runc and CNI have their own versions.
    expect(failed.map((c) => c.name).sort()).toEqual(
      ['artifact:crictl', 'artifact:kube-proxy', 'artifact:kubectl', 'artifact:kubelet'].sort(),
    );
    for (const c of failed) {
      expect(c.message).toContain('99.0.0');
      expect(c.message).toContain('404');
    }
    expect(r.checks.find((c) => c.name === 'image')?.ok).toBe(true);
  });

  it('an image tag the registry does not know fails the image check, naming the image', async () => {
    const image = `${mirror.hostPort}/${TEST_IMAGE_REPOSITORY}:does-not-exist`;
    const r = await preflight({ config: mirrorAgentConfig(mirror, { OCIImage: image }) });
    expect(r.ok).toBe(false);
    const failed = r.checks.filter((c) => !c.ok);
    expect(failed.map((c) => c.name)).toEqual(['image']);
    expect(failed[0]?.message).toContain(`${TEST_IMAGE_REPOSITORY}:does-not-exist`);
    expect(failed[0]?.message).toMatch(/404|not found|unknown/i);
  });

  it('changes nothing on a joined node either', async () => {
    const join = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
    expect(join, JSON.stringify(join.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
    const r = await preflight({ config: withVersion(mirrorAgentConfig(mirror), '1.35.0') });
    expect(r.ok).toBe(true);
  });
});
