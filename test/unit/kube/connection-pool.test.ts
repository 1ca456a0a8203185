import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createKubeClients, type KubeClients } from '../../../src/kube/client.js';
import { createAgentPool, poolKubeConnections } from '../../../src/kube/connection-pool.js';
import { createNodeWatch } from '../../../src/kube/node-watch.js';
import { startFakeKube, type FakeKube } from '../../support/fake-kube.js';

async function clientsFor(kube: FakeKube): Promise<KubeClients> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-pool-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kube.kubeconfigYaml());
  const c = createKubeClients({
    kubeconfigPath: kubeconfig,
    crdGroup: 'unbounded-cloud.io',
    env: {},
    rateLimit: { qps: 1000, burst: 1000 },
  });
  if (c.source === null) throw new Error(c.reason);
  return c;
}

describe('Kubernetes connections', () => {
  it('are kept and reused between requests instead of one per request', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    kube.addNode('w1', {});
    const { core } = await clientsFor(kube);
    for (let i = 0; i < 20; i++) await core.readNode({ name: 'w1' });
    // One connection carried the 20 requests (client-node alone opens one per request).
    expect(kube.connectionsAccepted).toBe(1);
  });

  it('a watch holds a connection of its own while requests share another', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    kube.addNode('w1', {});
    const { kc, core } = await clientsFor(kube);
    const seen: boolean[] = [];
    const stop = await createNodeWatch({ kc, core })(
      'w1',
      () => undefined,
      (n) => seen.push(n?.unschedulable ?? false),
      () => undefined,
    );
    onTestFinished(() => stop());
    await expect.poll(() => kube.openWatches).toBe(1);
    for (let i = 0; i < 5; i++) await core.readNode({ name: 'w1' });
    kube.patchNode('w1', { spec: { unschedulable: true } });
    await expect.poll(() => seen.at(-1)).toBe(true);
    expect(kube.connectionsAccepted).toBe(2);
  });

  it('an idle connection is closed after idleSocketMs; the next request opens a new one', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    kube.addNode('w1', {});
    const pool = createAgentPool({ idleSocketMs: 100 });
    const core = poolKubeConnections(kube.kubeConfig(), pool).makeApiClient(CoreV1Api);
    await core.readNode({ name: 'w1' });
    const before = kube.connectionsAccepted;
    await core.readNode({ name: 'w1' });
    expect(kube.connectionsAccepted).toBe(before);
    await new Promise((r) => setTimeout(r, 400));
    await core.readNode({ name: 'w1' });
    expect(kube.connectionsAccepted).toBe(before + 1);
  });
});

describe('createAgentPool', () => {
  it('shares one keep-alive agent per set of connection options, never across credentials', () => {
    const pool = createAgentPool();
    const a = pool.share(new https.Agent({ ca: 'CA-ONE', rejectUnauthorized: true }));
    const b = pool.share(new https.Agent({ ca: 'CA-ONE', rejectUnauthorized: true }));
    const c = pool.share(new https.Agent({ ca: 'CA-TWO', rejectUnauthorized: true }));
    const d = pool.share(new https.Agent({ ca: Buffer.from('CA-ONE'), cert: 'x'.repeat(100), key: 'k' }));
    const e = pool.share(new https.Agent({ ca: Buffer.from('CA-ONE'), cert: 'y'.repeat(100), key: 'k' }));
    const f = pool.share(new http.Agent({}));
    expect(b).toBe(a);
    expect(new Set([a, c, d, e, f]).size).toBe(5);
    expect(pool.size).toBe(5);
    expect(a).toBeInstanceOf(https.Agent);
    expect(f).not.toBeInstanceOf(https.Agent);
    expect((a as unknown as { keepAlive: boolean }).keepAlive).toBe(true);
    for (const x of [a, c, d, e, f]) x.destroy();
  });

  it('leaves agents of another kind (proxy agents) as they are', () => {
    class ProxyLike extends https.Agent {}
    const pool = createAgentPool();
    const proxy = new ProxyLike({});
    expect(pool.share(proxy)).toBe(proxy);
    expect(pool.size).toBe(0);
    proxy.destroy();
  });
});
