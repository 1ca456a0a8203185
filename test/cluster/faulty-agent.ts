/**
 * agentd on a node against the real control plane, as test/support/control-plane/agent.ts starts
 * it, but with an environment of its own (AGENTD_SIM_FAULTS, so an update can roll back) and the
 * API server the node is given free to be anything (one that refuses or never answers). The
 * harness's `startClusterAgent` takes no environment; this is the same join with one.
 */
import pino from 'pino';
import { startMirror, type Mirror } from '../../src/sim/mirror/index.js';
import { startTestDaemon, waitUntil, type TestDaemon } from '../support/daemon.js';
import { machinePath } from '../support/control-plane/agent.js';
import type { ControlPlane, KubeJson } from '../support/control-plane/index.js';
import { mirrorAgentConfig, rpcResult } from '../support/provision-fixtures.js';

let mirror: Promise<Mirror> | null = null;
function sharedMirror(): Promise<Mirror> {
  mirror ??= startMirror({ logger: pino({ level: 'silent' }) }).then((m) => {
    process.once('beforeExit', () => void m.close());
    return m;
  });
  return mirror;
}

export interface NodeAgent {
  d: TestDaemon;
  name: string;
  machine(): Promise<KubeJson | null>;
}

export async function startNodeAgent(
  cp: ControlPlane,
  o: {
    name: string;
    env?: Record<string, string>;
    server?: string;
    args?: string[];
    waitConnected?: boolean;
  },
): Promise<NodeAgent> {
  const m = await sharedMirror();
  const d = await startTestDaemon({
    args: ['--sim', '--watch', '--machine-name', o.name, ...(o.args ?? [])],
    env: o.env ?? {},
  });
  const config = mirrorAgentConfig(m, {
    MachineName: o.name,
    Cluster: {
      CaCertBase64: Buffer.from(cp.caPem).toString('base64'),
      ClusterDNS: '10.0.0.10',
      Version: '1.34.0',
    },
    Kubelet: {
      ApiServer: o.server ?? cp.server,
      Auth: { BootstrapToken: cp.bootstrapToken.token },
      Labels: { 'unbounded-cloud.io/site': 'cluster-test' },
      RegisterWithTaints: [],
    },
  });
  const join = await rpcResult<{ state: string }>(d, 'update', { config, wait: true });
  if (join.state !== 'succeeded') throw new Error(`the join ended ${join.state}:\n${d.logs().slice(-4000)}`);
  if (o.waitConnected !== false)
    await waitUntil(
      'the watcher to connect to kube-apiserver',
      async () => (await rpcResult<{ watcher: { connected: boolean } }>(d, 'status')).watcher.connected,
      d,
    );
  return {
    d,
    name: o.name,
    async machine() {
      const res = await cp.api.request('GET', machinePath(o.name));
      return res.status === 200 ? res.body : null;
    },
  };
}
