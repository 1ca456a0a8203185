// Why the fake API server (test/support/fake-kube): no fault: a server to point each kind of credentials at; test/cluster/tls.test.ts covers the kubeconfig and applied-config paths over HTTPS.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../../src/config/agent-config.js';
import { createKubeClients } from '../../../src/kube/client.js';
import type { KubeClients, KubeClientsUnavailable } from '../../../src/kube/client.js';
import { createMachineApi } from '../../../src/kube/machine.js';
import { makeAgentConfig, TEST_BOOTSTRAP_TOKEN } from '../../support/agent-config.js';
import { startFakeKube } from '../../support/fake-kube.js';
import type { FakeKube } from '../../support/fake-kube.js';

const GROUP = 'unbounded-cloud.io';
const noEnv = {};

function ok(result: KubeClients | KubeClientsUnavailable): KubeClients {
  if (result.source === null) throw new Error(`expected clients, got: ${result.reason}`);
  return result;
}

describe('createKubeClients', () => {
  let dir: string;
  let kube: FakeKube;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-kube-client-'));
    kube = await startFakeKube();
  });
  afterEach(async () => {
    await kube.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('uses --kubeconfig first, and the clients work against the server', async () => {
    const file = path.join(dir, 'kubeconfig');
    await writeFile(file, kube.kubeconfigYaml());
    const clients = ok(
      createKubeClients({
        kubeconfigPath: file,
        appliedConfig: agentConfigSchema.parse(makeAgentConfig()),
        crdGroup: GROUP,
        env: { KUBERNETES_SERVICE_HOST: '10.96.0.1' },
      }),
    );
    expect(clients).toMatchObject({ source: 'kubeconfig', server: kube.url, crdGroup: GROUP });
    kube.putMachine({ metadata: { name: 'w' } });
    const machine = await createMachineApi({ custom: clients.custom, group: clients.crdGroup }).getMachine(
      'w',
    );
    expect(machine?.metadata.name).toBe('w');
    kube.addNode('n1');
    expect((await clients.core.readNode({ name: 'n1' })).metadata?.name).toBe('n1');
  });

  it('fails with INVALID_CONFIG naming --kubeconfig when the file cannot be loaded', () => {
    const missing = path.join(dir, 'missing');
    expect(() => createKubeClients({ kubeconfigPath: missing, crdGroup: GROUP, env: noEnv })).toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining(`--kubeconfig ${missing}`),
      }),
    );
  });

  it('falls back to the applied config: API server, CA and bootstrap token', () => {
    const config = agentConfigSchema.parse(makeAgentConfig());
    const clients = ok(createKubeClients({ appliedConfig: config, crdGroup: GROUP, env: noEnv }));
    expect(clients.source).toBe('bootstrap-token');
    expect(clients.server).toBe('https://10.0.0.1:6443');
    expect(clients.kc.getCurrentCluster()).toMatchObject({
      caData: config.Cluster.CaCertBase64,
      skipTLSVerify: false,
    });
    expect(clients.kc.getCurrentUser()?.token).toBe(TEST_BOOTSTRAP_TOKEN);
    expect(JSON.stringify({ server: clients.server, source: clients.source })).not.toContain(
      TEST_BOOTSTRAP_TOKEN,
    );
  });

  it("uses the applied config's exec credential plugin when it has no bootstrap token", () => {
    const base = makeAgentConfig();
    const config = agentConfigSchema.parse({
      ...base,
      Kubelet: {
        ...base.Kubelet,
        Auth: { ExecCredential: { command: '/usr/local/bin/cred', args: ['token'] } },
      },
    });
    const clients = ok(createKubeClients({ appliedConfig: config, crdGroup: GROUP, env: noEnv }));
    expect(clients.source).toBe('exec-credential');
    expect(clients.kc.getCurrentUser()?.exec).toMatchObject({
      command: '/usr/local/bin/cred',
      args: ['token'],
    });
  });

  it('falls back to the in-cluster service account when KUBERNETES_SERVICE_HOST is set', async () => {
    await writeFile(path.join(dir, 'token'), 'sa-token');
    await writeFile(path.join(dir, 'ca.crt'), 'ca');
    const env = { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' };
    const clients = ok(createKubeClients({ crdGroup: GROUP, env, serviceAccountDir: dir }));
    expect(clients).toMatchObject({ source: 'in-cluster', server: 'https://[fd00::1]:443' });
    expect(
      createKubeClients({ crdGroup: GROUP, env, serviceAccountDir: dir, inCluster: false }),
    ).toMatchObject({
      source: null,
      reason: expect.stringContaining('in-cluster disabled'),
    });
  });

  it('returns a reason instead of clients when no credentials exist', async () => {
    expect(createKubeClients({ crdGroup: GROUP, env: noEnv })).toEqual({
      source: null,
      reason: expect.stringContaining('no Kubernetes credentials'),
    });
    const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1' };
    expect(createKubeClients({ crdGroup: GROUP, env, serviceAccountDir: dir })).toEqual({
      source: null,
      reason: expect.stringContaining('no service account token'),
    });
  });

  it('rejects a malformed --crd-group', () => {
    expect(() => createKubeClients({ crdGroup: 'Not A Group', env: noEnv })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining('--crd-group') }),
    );
  });
});
