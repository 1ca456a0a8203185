// Why the fake API server (test/support/fake-kube): the TCP connections and TLS handshakes the server accepted, counted at the server.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createKubeClients, type KubeClients } from '../../../src/kube/client.js';
import {
  MAX_AGENTS,
  createAgentPool,
  makeApiClient,
  type AgentPool,
  type KubeTransport,
} from '../../../src/kube/connection-pool.js';
import { createNodeWatch, type NodeRecord } from '../../../src/kube/node-watch.js';
import { createReflector } from '../../../src/kube/reflector.js';
import type { AgentError } from '../../../src/errors.js';
import { systemClock } from '../../../src/host/clock.js';
import { startFakeKube, type FakeKube } from '../../support/fake-kube.js';
import { makeTestCa } from '../../support/test-ca.js';

/** Clients of a bare KubeConfig whose requests all go through `pool`. */
function pooled(kc: KubeConfig, pool: AgentPool = createAgentPool()) {
  const transport: KubeTransport = { limiter: null, pool };
  return { kc, transport, core: makeApiClient(kc, transport, CoreV1Api) };
}

/** Follow the Node `name` with a reflector; returns its stop function. */
function followNode(
  c: { kc: KubeConfig; core: CoreV1Api; transport: KubeTransport },
  name: string,
  onEvent: (n: NodeRecord) => void,
  onFailure: (err: AgentError) => void = () => undefined,
): () => Promise<void> {
  const r = createReflector<NodeRecord>({
    ...createNodeWatch(c).source(name),
    onList: () => undefined,
    onEvent: (_type, n) => onEvent(n),
    onFailure,
    clock: systemClock,
  });
  void r.start();
  return () => r.stop();
}

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
    const clients = await clientsFor(kube);
    const { core } = clients;
    const seen: boolean[] = [];
    const stop = followNode(clients, 'w1', (n) => seen.push(n.unschedulable));
    onTestFinished(() => stop());
    await expect.poll(() => kube.openWatches).toBe(1);
    for (let i = 0; i < 5; i++) await core.readNode({ name: 'w1' });
    kube.patchNode('w1', { spec: { unschedulable: true } });
    await expect.poll(() => seen.at(-1)).toBe(true);
    expect(kube.connectionsAccepted).toBe(2);
  });

  it('a quiet watch outlives idleSocketMs: the idle close applies to free connections only', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    kube.addNode('w1', {});
    const clients = pooled(kube.kubeConfig(), createAgentPool({ idleSocketMs: 100 }));
    const seen: boolean[] = [];
    const ended: unknown[] = [];
    const stop = followNode(
      clients,
      'w1',
      (n) => seen.push(n.unschedulable),
      (err) => ended.push(err),
    );
    onTestFinished(() => stop());
    await expect.poll(() => kube.openWatches).toBe(1);
    const connections = kube.connectionsAccepted;
    // Nothing on the watch for many times the idle timeout (API servers send nothing either while
    // nothing changes, between bookmarks).
    await new Promise((r) => setTimeout(r, 600));
    expect(ended).toEqual([]);
    expect(kube.openWatches).toBe(1);
    kube.patchNode('w1', { spec: { unschedulable: true } });
    await expect.poll(() => seen.at(-1)).toBe(true);
    expect(kube.connectionsAccepted).toBe(connections);
  });

  it('an idle connection is closed after idleSocketMs; the next request opens a new one', async () => {
    const kube = await startFakeKube();
    onTestFinished(() => kube.close());
    kube.addNode('w1', {});
    const pool = createAgentPool({ idleSocketMs: 100 });
    const { core } = pooled(kube.kubeConfig(), pool);
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
    expect(a).toBeInstanceOf(https.Agent);
    expect(f).not.toBeInstanceOf(https.Agent);
    expect((a as unknown as { keepAlive: boolean }).keepAlive).toBe(true);
    for (const x of [a, c, d, e, f]) x.destroy();
  });

  it('keeps the most recently used agents only, so rotating credentials do not pile up', () => {
    const pool = createAgentPool();
    const made = Array.from({ length: 10 }, (_, i) => pool.share(new https.Agent({ ca: `CA-${i}` })));
    expect(pool.size).toBe(MAX_AGENTS);
    // The latest are still shared; the first was dropped and is made again.
    expect(pool.share(new https.Agent({ ca: 'CA-9' }))).toBe(made[9]);
    const again = pool.share(new https.Agent({ ca: 'CA-0' }));
    expect(again).not.toBe(made[0]);
    for (const x of [...made, again]) x.destroy();
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

describe('Kubernetes connections over TLS', () => {
  it('one TLS handshake for many requests, and the server is still verified against the CA', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-pool-tls-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const ca = await makeTestCa(dir);
    let handshakes = 0;
    const server = https.createServer({ key: ca.key, cert: ca.cert }, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'w1' } }));
    });
    server.on('secureConnection', () => (handshakes += 1));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    onTestFinished(() => {
      server.closeAllConnections();
      server.close();
    });
    const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
    const client = (caFile: string): CoreV1Api => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'c', server: url, caFile }],
        users: [{ name: 'u', token: 'secret-token' }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      return pooled(kc).core;
    };
    const trusted = client(ca.caFile);
    for (let i = 0; i < 10; i++) expect((await trusted.readNode({ name: 'w1' })).metadata?.name).toBe('w1');
    expect(handshakes).toBe(1);
    // A client that trusts another CA is refused by its own verification, pool or not.
    await expect(client(ca.emptyFile).readNode({ name: 'w1' })).rejects.toThrow();
    expect(handshakes).toBe(1);
  });
});
