/**
 * etcd v3.6 (built by scripts/control-plane.sh) on 127.0.0.1 with free ports, its data in the
 * control plane's temp dir, without fsync (`--unsafe-no-fsync`: a test cluster that never
 * outlives its test file does not need durability, and fsync on a shared disk is most of a
 * write's cost).
 */
import http from 'node:http';
import path from 'node:path';
import { freePort, pollUntil, startProcess, type ManagedProcess, type Reaper } from './processes.js';

export interface Etcd {
  /** `http://127.0.0.1:<port>` */
  url: string;
  process: ManagedProcess;
  /** Compact the key space up to the current revision (etcd's v3 HTTP gateway); returns it. */
  compact(): Promise<number>;
  stop(): Promise<void>;
}

function post(url: string, body: unknown): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString('utf8')));
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`POST ${url}: HTTP ${res.statusCode}: ${text}`));
          else resolve(JSON.parse(text) as Record<string, unknown>);
        });
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

export async function startEtcd(bin: string, dir: string, reaper: Reaper): Promise<Etcd> {
  const [client, peer] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${client}`;
  const peerUrl = `http://127.0.0.1:${peer}`;
  const p = startProcess(reaper, 'etcd', path.join(bin, 'etcd'), [
    '--name=test',
    `--data-dir=${path.join(dir, 'etcd')}`,
    `--listen-client-urls=${url}`,
    `--advertise-client-urls=${url}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=test=${peerUrl}`,
    '--unsafe-no-fsync',
    '--log-level=warn',
  ]);
  await pollUntil(
    'etcd to answer /health',
    () =>
      new Promise<boolean>((resolve) => {
        http
          .get(`${url}/health`, (res) => {
            let t = '';
            res.on('data', (c: Buffer) => (t += c.toString('utf8')));
            res.on('end', () => resolve(res.statusCode === 200 && t.includes('"true"')));
          })
          .on('error', () => resolve(false));
      }),
    30_000,
    p,
  );
  return {
    url,
    process: p,
    async compact() {
      // The gateway's int64 fields are JSON strings.
      const range = (await post(`${url}/v3/kv/range`, { key: Buffer.from('/').toString('base64') })) as {
        header: { revision: string };
      };
      const revision = Number(range.header.revision);
      await post(`${url}/v3/kv/compaction`, { revision: String(revision), physical: true });
      return revision;
    },
    stop: () => p.stop(),
  };
}
