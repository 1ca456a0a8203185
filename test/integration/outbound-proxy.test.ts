/**
 * agentd behind an HTTP proxy, through the daemon: the proxy variables of its environment route
 * an update's downloads (docs/operations.md, "Behind an HTTP proxy"), and a bad one stops the
 * start with a message naming it. The artifacts' host name is one only the test proxy knows,
 * so a join that succeeds downloaded through it.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { simDefaultConfig } from '../../src/sim/default-config.js';
import { mirrorDownloads } from '../../src/sim/mirror/artifacts.js';
import { makeTempDir, runAgentd } from '../support/daemon.js';
import { startTestProxy } from '../support/http-proxy.js';
import { SimNode, type Op } from '../support/sim-node.js';

describe('a daemon behind an HTTP proxy', () => {
  it('downloads an update’s artifacts through HTTP_PROXY, and says so when it starts', async () => {
    const hosts: Record<string, string> = {};
    const proxy = await startTestProxy({ hosts });
    try {
      const node = new SimNode(await makeTempDir());
      const daemon = await node.start({ env: { HTTP_PROXY: proxy.url, NO_PROXY: 'corp.example' } });
      const { port } = JSON.parse(await readFile(path.join(node.stateDir, 'sim-mirror.json'), 'utf8')) as {
        port: number;
      };
      const proxied = `mirror.proxied.test:${port}`;
      hosts[proxied] = `127.0.0.1:${port}`;
      const config = {
        ...simDefaultConfig({ url: `http://127.0.0.1:${port}`, hostPort: `127.0.0.1:${port}` }),
        Downloads: mirrorDownloads(`http://${proxied}`),
      };
      const op = await node.update({ config, wait: true });
      expect(op.state, JSON.stringify(op.error)).toBe('succeeded');
      const through = proxy.requests.map((r) => `${r.method} ${r.target}`);
      expect(through.some((t) => t.endsWith('/kubelet'))).toBe(true);
      // The preflight's HEADs and the downloads' GETs, all of them through the proxy.
      expect(
        through.filter(
          (t) => !t.startsWith(`GET http://${proxied}/`) && !t.startsWith(`HEAD http://${proxied}/`),
        ),
      ).toEqual([]);
      expect(through.some((t) => t.startsWith('HEAD ') && t.endsWith('/kubelet'))).toBe(true);
      // The image comes from 127.0.0.1: loopback is never proxied.
      expect(through.some((t) => t.includes('/v2/'))).toBe(false);
      expect(daemon.logs()).toContain('outbound HTTP goes through a proxy');
      expect(daemon.logs()).toContain(`"HTTP_PROXY":"${proxy.url}"`);
      await node.stop();
    } finally {
      await proxy.close();
    }
  });

  it('a download the proxy cannot serve fails naming the proxy, and the node is left as it was', async () => {
    const proxy = await startTestProxy({ hosts: {} });
    try {
      const node = new SimNode(await makeTempDir());
      await node.start({ env: { HTTP_PROXY: proxy.url } });
      await node.join();
      const before = await node.status();
      const config = {
        ...simDefaultConfig({ url: 'http://127.0.0.1:1', hostPort: '127.0.0.1:1' }),
        Downloads: mirrorDownloads('http://unknown.proxied.test:8080'),
      };
      const op: Op = await node.update({
        config: { ...config, Cluster: { ...config.Cluster, Version: '1.34.1' } },
        wait: true,
      });
      expect(op.state).toBe('failed');
      expect(op.error?.message).toMatch(/through the proxy http:\/\/127\.0\.0\.1:\d+/);
      const after = await node.status();
      expect(after.node.activeMachine).toBe(before.node.activeMachine);
      await node.stop();
    } finally {
      await proxy.close();
    }
  });

  it('does not start with a proxy variable it could not follow, and names it', async () => {
    const dir = await makeTempDir();
    const run = await runAgentd(['--sim'], { cwd: dir, env: { HTTPS_PROXY: 'socks5://proxy.corp:1080' } });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('HTTPS_PROXY="socks5://proxy.corp:1080": socks5 proxies are not supported');
  });
});
