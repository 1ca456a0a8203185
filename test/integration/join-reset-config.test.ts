/**
 * Bad agent configs through the real daemon: every required field missing, both and neither
 * auth forms — each an invalid-params error (−32602) whose issues name the field, and the node
 * left as it was. Then applied configs on disk with a bad or missing `.sha256` sidecar.
 */
import { stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentConfigInput } from '../../src/config/agent-config.js';
import { makeAgentConfig } from '../support/agent-config.js';
import { makeTempDir, type TestDaemon } from '../support/daemon.js';
import {
  configWithout,
  nodeStatus,
  rpcError,
  rpcResult,
  snapshotTree,
  startSimDaemon,
  writeAppliedConfig,
} from '../support/provision-fixtures.js';

const REQUIRED = [
  'MachineName',
  'Cluster.CaCertBase64',
  'Cluster.ClusterDNS',
  'Cluster.Version',
  'Kubelet.ApiServer',
  'Kubelet.Auth',
];

describe('update with a bad agent config', () => {
  let d: TestDaemon;
  let before: Record<string, string>;

  beforeAll(async () => {
    d = await startSimDaemon();
    before = await snapshotTree(d.root);
  });
  afterAll(async () => {
    await d?.dispose();
  });

  it.each(REQUIRED)('a config missing %s is refused with an issue naming it', async (field) => {
    const err = await rpcError(d, 'update', { config: configWithout(field), wait: true });
    expect(err.code).toBe(-32602);
    expect(err.data.code).toBe('INVALID_PARAMS');
    expect(err.data.issues?.map((i) => i.path)).toContain(`config.${field}`);
    expect(err.message).toContain(`config.${field}`);
  });

  it('preflight refuses the same configs the same way', async () => {
    const err = await rpcError(d, 'preflight', { config: configWithout('Cluster.Version') });
    expect(err.code).toBe(-32602);
    expect(err.data.issues?.map((i) => i.path)).toContain('config.Cluster.Version');
  });

  it.each([
    [
      'both',
      {
        BootstrapToken: 'abc123.0123456789abcdef',
        ExecCredential: {
          command: '/usr/local/bin/get-token',
          apiVersion: 'client.authentication.k8s.io/v1',
        },
      },
    ],
    ['neither', {}],
  ])('%s auth forms are refused, naming Kubelet.Auth', async (_label, auth) => {
    const base = makeAgentConfig();
    const config: AgentConfigInput = { ...base, Kubelet: { ...base.Kubelet, Auth: auth } };
    const err = await rpcError(d, 'update', { config, wait: true });
    expect(err.code).toBe(-32602);
    const issue = err.data.issues?.find((i) => i.path === 'config.Kubelet.Auth');
    expect(issue?.message).toMatch(/exactly one of BootstrapToken and ExecCredential/);
  });

  it('a refused config left the node as it was: no operation, no file', async () => {
    expect(await rpcResult(d, 'operations.list')).toEqual({ operations: [] });
    expect((await nodeStatus(d)).node).toMatchObject({ activeMachine: null, applied: null });
    expect(await snapshotTree(d.root)).toEqual(before);
  });
});

describe('applied configs on disk', () => {
  async function daemonWithApplied(sidecar: string | null | undefined) {
    const dir = await makeTempDir('agentd-applied-');
    const root = path.join(dir, 'root');
    const written = await writeAppliedConfig(root, 'kube1', makeAgentConfig(), { sidecar });
    const d = await startSimDaemon({ dir, root });
    return { d, written, root };
  }

  it('a sidecar that does not match is refused: a status warning', async () => {
    const { d } = await daemonWithApplied(`${'0'.repeat(64)}\n`);
    const status = await nodeStatus(d);
    expect(status.node.applied).toBeNull();
    expect(status.node.warnings.join('\n')).toMatch(/kube1: CHECKSUM_MISMATCH/);
    await d.stop();
  });

  it('a sidecar that does not match: config.get fails with CHECKSUM_MISMATCH and update refuses', async () => {
    const { d, root } = await daemonWithApplied(`${'0'.repeat(64)}\n`);
    // The simulated host's own state (and its lock file) is not the node's: leave it out.
    const snapshot = () => snapshotTree(root, { ignore: ['var/lib/agentd-sim'] });
    const before = await snapshot();
    const err = await rpcError(d, 'config.get');
    expect(err.data.code).toBe('CHECKSUM_MISMATCH');
    expect((await nodeStatus(d)).node.activeMachine).toBe('kube1');
    // Never treated as a fresh node: a bare update must not provision over the serving machine.
    const refused = await rpcError(d, 'update', { wait: true });
    expect(refused.data.code).toBe('PRECONDITION_FAILED');
    expect(refused.message).toMatch(/CHECKSUM_MISMATCH/);
    await d.stop();
    expect(await snapshot()).toEqual(before);
  });

  it('an applied config changed by hand while agentd runs is seen at the next read, whatever its times say', async () => {
    const { d, written } = await daemonWithApplied(undefined);
    expect(await rpcResult<{ verified: boolean; hash: string }>(d, 'config.get')).toMatchObject({
      verified: true,
      hash: written.hash,
    });
    // The same length and the same times: only the bytes differ from what agentd read before.
    const { atime, mtime } = await stat(written.file);
    expect(written.bytes).toContain('worker-01');
    await writeFile(written.file, written.bytes.replace('worker-01', 'worker-02'));
    await utimes(written.file, atime, mtime);
    expect((await rpcError(d, 'config.get')).data.code).toBe('CHECKSUM_MISMATCH');
    // Put back: trusted again.
    await writeFile(written.file, written.bytes);
    expect(await rpcResult<{ verified: boolean }>(d, 'config.get')).toMatchObject({ verified: true });
    await d.stop();
  });

  it('a missing sidecar is read with a warning, unverified', async () => {
    const { d, written } = await daemonWithApplied(null);
    const status = await nodeStatus(d);
    expect(status.node).toMatchObject({ activeMachine: 'kube1', applied: { hash: written.hash } });
    expect(status.node.warnings).toContain('kube1: applied config has no .sha256 sidecar');
    const shown = await rpcResult<{ verified: boolean; hash: string }>(d, 'config.get');
    expect(shown).toMatchObject({ verified: false, hash: written.hash });
    await d.stop();
  });
});
