/**
 * agentd as on a node, against the real control plane: the built daemon (`--sim`, temp paths,
 * test/support/daemon.ts) joined with an agent config whose `Kubelet.ApiServer`,
 * `Cluster.CaCertBase64` and `Kubelet.Auth.BootstrapToken` name the control plane, and
 * `--watch`, so that it takes its credentials from the applied config as a node does
 * (docs/watcher.md, "Setup"). Or, with `kubeconfig`, from a kubeconfig file instead.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import pino from 'pino';
import { onTestFinished } from 'vitest';
import { startMirror, type Mirror } from '../../../src/sim/mirror/index.js';
import { makeTempDir, startTestDaemon, waitUntil, type TestDaemon } from '../daemon.js';
import { mirrorAgentConfig, rpcResult } from '../provision-fixtures.js';
import type { ControlPlane } from './index.js';
import { tokenKubeconfigYaml } from './pki.js';

export interface ClusterAgentOptions {
  /** The Machine (and Node) name; the applied config's MachineName. */
  name: string;
  /** The API server URL the node is given (default kube-apiserver's; a proxy's to cut it). */
  server?: string;
  /** Another bootstrap token (default the control plane's). */
  token?: string;
  /** The CA the node is told to trust (default the control plane's). */
  caPem?: string;
  /**
   * Credentials from a kubeconfig file instead of the applied config: `true` for one with the
   * token, or the kubeconfig's text (a node's own identity, identity.ts).
   */
  kubeconfig?: boolean | string;
  /** More agentd flags. */
  args?: string[];
  /** Wait until the watcher is connected (default true). */
  waitConnected?: boolean;
  /** Node labels of the applied config. */
  labels?: Record<string, string>;
  /** agentd's environment (e.g. AGENTD_SIM_FAULTS, so an update can roll back). */
  env?: Record<string, string>;
}

export interface ClusterAgent {
  d: TestDaemon;
  name: string;
  /** The node's Machine as the API server has it now (null: none). */
  machine(): Promise<Record<string, any> | null>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

let mirror: Promise<Mirror> | null = null;
/** One artifact mirror for the test file's agents, closed when the worker exits. */
function sharedMirror(): Promise<Mirror> {
  mirror ??= startMirror({ logger: pino({ level: 'silent' }) }).then((m) => {
    process.once('beforeExit', () => void m.close());
    return m;
  });
  return mirror;
}

export const machinePath = (name: string): string => `/apis/unbounded-cloud.io/v1alpha3/machines/${name}`;

/** Start the daemon, join the node (kube1), and wait until the watcher is connected (unless told not to). */
export async function startClusterAgent(cp: ControlPlane, o: ClusterAgentOptions): Promise<ClusterAgent> {
  const m = await sharedMirror();
  const token = o.token ?? cp.bootstrapToken.token;
  const server = o.server ?? cp.server;
  const args = ['--sim', '--watch', '--machine-name', o.name, ...(o.args ?? [])];
  if (o.kubeconfig) {
    const dir = await makeTempDir('agentd-cluster-kubeconfig-');
    const file = path.join(dir, 'kubeconfig');
    const text =
      typeof o.kubeconfig === 'string'
        ? o.kubeconfig
        : tokenKubeconfigYaml(o.caPem ?? cp.caPem, server, token);
    await writeFile(file, text, { mode: 0o600 });
    args.push('--kubeconfig', file);
  }
  const d = await startTestDaemon({ args, env: o.env ?? {} });
  const config = mirrorAgentConfig(m, {
    MachineName: o.name,
    Cluster: {
      CaCertBase64: Buffer.from(o.caPem ?? cp.caPem).toString('base64'),
      ClusterDNS: '10.0.0.10',
      Version: '1.34.0',
    },
    Kubelet: {
      ApiServer: server,
      Auth: { BootstrapToken: token },
      Labels: o.labels ?? { 'unbounded-cloud.io/site': 'cluster-test' },
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

/** Delete the Machines these tests created, so the next test starts clean. */
export function deleteMachineAfterTest(cp: ControlPlane, name: string): void {
  onTestFinished(async () => {
    await cp.api.request('DELETE', machinePath(name));
  });
}
