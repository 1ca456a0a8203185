/**
 * The connection pool's HTTPS path (src/kube/connection-pool.ts) against kube-apiserver's own
 * CA: the CA from the applied config (`Cluster.CaCertBase64`, with the bootstrap token) and from
 * a kubeconfig (`certificate-authority-data`). Trusted, the watcher connects and its requests
 * share kept connections; another CA, and agentd refuses the server, saying why.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { makeTempDir, waitUntil } from '../support/daemon.js';
import { machinePath, startClusterAgent } from '../support/control-plane/agent.js';
import { auditEvents, bootstrapUser } from '../support/control-plane/audit.js';
import { controlPlaneAvailable, type KubeJson } from '../support/control-plane/index.js';
import { useControlPlane } from '../support/control-plane/use.js';
import { rpcResult } from '../support/provision-fixtures.js';
import { makeTestCa } from '../support/test-ca.js';

const watcher = async (d: Parameters<typeof rpcResult>[0]): Promise<KubeJson> =>
  (await rpcResult<{ watcher: KubeJson }>(d, 'status')).watcher;

describe.skipIf(!controlPlaneAvailable())('HTTPS to kube-apiserver', () => {
  const cp = useControlPlane({ apiServer: { audit: true } });
  let n = 0;

  it.each([
    ['the applied config', false],
    ['a kubeconfig', true],
  ] as const)('trusts the CA from %s, and reuses its connections', async (_label, kubeconfig) => {
    const proxy = await cp().proxy();
    const a = await startClusterAgent(cp(), { name: `tls-${++n}`, server: proxy.url, kubeconfig });
    await waitUntil('the Machine registered', async () => (await a.machine()) !== null, a.d);
    const connections = proxy.accepted();
    const since = new Date().toISOString();
    // Two repaves, one after the other: each writes Provisioning, then Joining with the ack.
    for (const counter of [1, 2]) {
      await cp().api.mergePatch(machinePath(a.name), { spec: { operations: { repaveCounter: counter } } });
      await waitUntil(
        `repave ${counter} acknowledged`,
        async () => (await a.machine())?.status?.operations?.repaveCounter === counter,
        a.d,
      );
    }
    // Every request the agent made meanwhile (status writes, Events, …), all through the proxy.
    const requests = (await auditEvents(cp(), bootstrapUser(cp()))).filter(
      (e) => e.verb !== 'watch' && (e.requestReceivedTimestamp as string) >= since,
    );
    // On connections already open, or a new one where two requests overlapped (on a loaded
    // machine they do more often); a pool that did not keep connections would open one per request.
    expect(requests.length).toBeGreaterThanOrEqual(4);
    expect(proxy.accepted() - connections, `${requests.length} requests`).toBeLessThan(requests.length / 2);
  });

  it.each([
    ['the applied config', false],
    ['a kubeconfig', true],
  ] as const)('refuses kube-apiserver when %s names another CA', async (_label, kubeconfig) => {
    const other = await makeTestCa(await makeTempDir('agentd-other-ca-'));
    const a = await startClusterAgent(cp(), {
      name: `tls-${++n}`,
      kubeconfig,
      caPem: await readFile(other.caFile, 'utf8'),
      waitConnected: false,
      // Credentials from the start, but an API server it cannot trust: the fleet policy cannot be
      // read, so the join would wait in the gate (docs/fleet.md); this node takes no part in it.
      args: ['--no-fleet'],
    });
    await waitUntil(
      'the watcher to say why it cannot connect',
      async () => /certificate/i.test(String((await watcher(a.d)).lastError)),
      a.d,
    );
    const w = await watcher(a.d);
    expect(w).toMatchObject({ connected: false, lastErrorCode: 'KUBE_UNAVAILABLE' });
    expect(await a.machine()).toBeNull();
  });
});
