/**
 * One download client of `bench/provision.ts` (a), run in a process of its own, as curl is: the
 * clients must not share a heap, a malloc arena or garbage-collector threads, or whichever runs
 * after another pays for the other's garbage. The production client is then measured the way the
 * daemon runs it, in a long-lived process that does nothing else.
 *
 * Usage: `node --import tsx provision-download-client.ts agentd|inline|receive`. Reads one JSON
 * request a line on stdin, `{"url","sha256","dir"}`, downloads into a fresh entry under `dir`,
 * and answers one JSON line `{"ms","cpuMs"}`: the wall time of the download alone and the CPU
 * every thread of this process used for it. The file is removed after the measurement and before
 * the answer, so the next round starts clean. Exits when stdin closes.
 */
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { Agent, interceptors, request } from 'undici';
import { systemClock } from '../../src/host/clock.js';
import { DEFAULT_RETRY_POLICY, ensureCached } from '../../src/provision/artifacts/index.js';

export type DownloadVariant = 'agentd' | 'inline' | 'receive';

interface DownloadRequest {
  url: string;
  sha256: string;
  dir: string;
}

const variant = process.argv[2] as DownloadVariant;
if (!['agentd', 'inline', 'receive'].includes(variant)) {
  process.stderr.write(`usage: provision-download-client.ts agentd|inline|receive (got ${variant})\n`);
  process.exit(2);
}
const dispatcher = new Agent().compose(interceptors.redirect({ maxRedirections: 5 }));

/** Download `req.url` once; returns what to remove afterwards. */
async function download(req: DownloadRequest): Promise<string> {
  const target = path.join(req.dir, `${variant}-${randomUUID()}`);
  if (variant === 'receive') {
    // Not a production path: what receiving and writing alone cost in Node, the floor under agentd.
    const res = await request(req.url, { dispatcher });
    await pipeline(res.body, createWriteStream(target, { flags: 'wx', highWaterMark: 1 << 20 }));
    return target;
  }
  await ensureCached(
    { what: 'bench download', url: req.url, sha256: req.sha256, task: 'download blob' },
    {
      ctx: {
        dispatcher,
        clock: systemClock,
        signal: new AbortController().signal,
        retry: DEFAULT_RETRY_POLICY,
      },
      cacheDir: target,
      // `agentd` is the production choice (by size and CPU count); `inline` forces the path
      // that single-CPU hosts take.
      sink: { where: variant === 'inline' ? 'inline' : 'auto' },
    },
  );
  return target;
}

const cpuNow = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

for await (const line of createInterface({ input: process.stdin })) {
  const req = JSON.parse(line) as DownloadRequest;
  const cpu = cpuNow();
  const start = performance.now();
  const target = await download(req);
  const ms = performance.now() - start;
  const cpuMs = cpuNow() - cpu;
  await rm(target, { recursive: true, force: true });
  process.stdout.write(`${JSON.stringify({ ms, cpuMs })}\n`);
}
await dispatcher.close();
