/**
 * Provisioning benchmark (issue 3, "Measure"): every number is compared with a baseline
 * measured in the same run, on the same machine.
 *
 *   (a) download of a large file from the mirror: agentd's downloader vs `curl -s -o`, with the
 *       CPU each used, and a no-hash undici download for reference; every client in a process
 *       of its own
 *   (b) extraction of one large gzip layer: `applyLayer` vs GNU `tar -xzf`
 *   (c) `installArtifacts` into a fresh rootfs with a cold vs a warm cache
 *
 * Run: `npx tsx bench/provision.ts` (about a minute); `BENCH_PARTS=a` runs (a) alone,
 * `BENCH_ROUNDS=21` pairs more download rounds (default 11). No assertions on times: it prints a
 * table and the ratios, and the targets they are read against.
 */
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os, { availableParallelism } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { Agent, interceptors } from 'undici';
import { agentConfigSchema } from '../src/config/agent-config.js';
import { installArtifacts } from '../src/provision/artifacts/index.js';
import { WORKER_SINK_MIN_CPUS } from '../src/provision/artifacts/sink.js';
import { applyLayer } from '../src/provision/oci/index.js';
import { mirrorDownloads } from '../src/sim/mirror/artifacts.js';
import { makeAgentConfig } from '../test/support/agent-config.js';
import { createLayerFixture } from './lib/provision-layer-fixture.js';
import { startDownloadClient, startMirrorProcess, type MirrorProcess } from './lib/provision-processes.js';
import { MiB, cpuMs, median, mibps, printTable, ratio, seconds, timed } from './lib/provision-report.js';

const DOWNLOAD_BYTES = 256 * MiB;
/** Rounds per measurement (medians are reported); downloads are short, so they get more. */
const ROUNDS = 3;
const DOWNLOAD_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 11);
/** Which parts to run: `BENCH_PARTS=a` for the download alone (default `abc`). */
const PARTS = process.env.BENCH_PARTS ?? 'abc';

async function benchDownload(mirror: MirrorProcess, work: string): Promise<void> {
  const url = `${mirror.baseUrl}/bench/blob-${DOWNLOAD_BYTES}.bin`;
  const sha256 = (await (await fetch(`${url}.sha256`)).text()).split(/\s+/)[0] ?? '';
  // Every client runs in a process of its own, as curl does, and answers its wall time and the
  // CPU of all its threads; the mirror's CPU is in neither.
  const variants = [
    { name: 'agentd ensureCached (production: hash, verify, rename)', variant: 'agentd' },
    { name: '  variant: write and hash on one thread (the path below 2 CPUs)', variant: 'inline' },
    { name: '  reference: undici into a file, no hash (not agentd)', variant: 'receive' },
  ] as const;
  const clients = variants.map((v) => startDownloadClient(v.variant));
  const curl = async (): Promise<{ ms: number; cpu: number }> => {
    const out = path.join(work, `curl-${randomUUID()}.bin`);
    const before = cpuMs().children;
    const { ms } = await timed(() => execa('curl', ['-s', '-o', out, url]));
    const cpu = cpuMs().children - before;
    await rm(out, { force: true });
    return { ms, cpu };
  };
  const withMirror = async (
    run: () => Promise<{ ms: number; cpu: number }>,
  ): Promise<{ ms: number; cpu: number; mirrorCpu: number }> => {
    const before = mirror.cpuMs();
    const r = await run();
    return { ...r, mirrorCpu: mirror.cpuMs() - before };
  };
  try {
    // Warm-up: the mirror generates its block, each client process loads its code and opens its
    // connection, and the page cache settles.
    await curl();
    for (const client of clients) await client.download(url, sha256, work);
    // Paired rounds: each variant runs back to back with its own curl run (order alternating), and
    // the ratio is taken per pair. This machine's I/O speed drifts by tens of percent within a
    // minute; a ratio of two runs a second apart cancels the drift, the median drops the outliers.
    type Run = Awaited<ReturnType<typeof withMirror>>;
    const curlRuns: Run[] = [];
    const runs = variants.map(() => [] as Array<Run & { ratio: number }>);
    for (let i = 0; i < DOWNLOAD_ROUNDS; i++) {
      for (const [v, client] of clients.entries()) {
        const ours = (): Promise<{ ms: number; cpu: number }> => client.download(url, sha256, work);
        let c: Run;
        let x: Run;
        if ((i + v) % 2 === 0) {
          c = await withMirror(curl);
          x = await withMirror(ours);
        } else {
          x = await withMirror(ours);
          c = await withMirror(curl);
        }
        curlRuns.push(c);
        runs[v]!.push({ ...x, ratio: c.ms / x.ms });
      }
    }
    const base = median(curlRuns.map((r) => r.ms));
    const medianOf = (rs: readonly Run[], key: 'ms' | 'cpu' | 'mirrorCpu'): number =>
      median(rs.map((r) => r[key]));
    console.log(
      `\n(a) download ${DOWNLOAD_BYTES / MiB} MiB from the mirror (child process on 127.0.0.1): ${DOWNLOAD_ROUNDS} rounds, each client in its own process and paired with a curl run; medians`,
    );
    printTable(
      ['client', 'seconds', 'MiB/s', 'CPU ms', 'mirror CPU ms', 'throughput vs curl', 'per-pair range'],
      [
        [
          'curl -s -o FILE (baseline)',
          seconds(base),
          mibps(DOWNLOAD_BYTES, base),
          medianOf(curlRuns, 'cpu').toFixed(0),
          medianOf(curlRuns, 'mirrorCpu').toFixed(0),
          '1.00',
          '',
        ],
        ...variants.map((variant, v) => {
          const rs = runs[v]!;
          const ratios = rs.map((r) => r.ratio);
          return [
            variant.name,
            seconds(medianOf(rs, 'ms')),
            mibps(DOWNLOAD_BYTES, medianOf(rs, 'ms')),
            medianOf(rs, 'cpu').toFixed(0),
            medianOf(rs, 'mirrorCpu').toFixed(0),
            ratio(median(ratios)),
            `${ratio(Math.min(...ratios))} … ${ratio(Math.max(...ratios))}`,
          ];
        }),
      ],
    );
  } finally {
    await Promise.all(clients.map((client) => client.stop()));
  }
  console.log('  target: >= 0.90 for the production row.');
  console.log(
    `  sink: ${availableParallelism()} CPUs, so large downloads ${
      availableParallelism() >= WORKER_SINK_MIN_CPUS
        ? 'are written and hashed on the worker thread, which is handed each received chunk'
        : 'are written and hashed on the download thread'
    } (worker from ${WORKER_SINK_MIN_CPUS} CPUs). CPU ms: all of the client's threads; the mirror's is apart. Both share the ${availableParallelism()} CPUs.`,
  );
}

async function benchExtract(work: string): Promise<void> {
  const layer = await createLayerFixture(path.join(work, 'layer'));
  const fresh = async (): Promise<string> => {
    const dir = path.join(work, `extract-${randomUUID()}`);
    await mkdir(dir);
    return dir;
  };
  const ours = async (): Promise<number> => {
    const dir = await fresh();
    const { ms } = await timed(() =>
      applyLayer(dir, createReadStream(layer.file, { highWaterMark: 1 << 20 }), {
        mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
      }),
    );
    await rm(dir, { recursive: true, force: true });
    return ms;
  };
  const gnuTar = async (): Promise<number> => {
    const dir = await fresh();
    const { ms } = await timed(() => execa('tar', ['-xzf', layer.file, '-C', dir]));
    await rm(dir, { recursive: true, force: true });
    return ms;
  };
  const t = { tar: [] as number[], ours: [] as number[] };
  for (let i = 0; i < ROUNDS; i++) {
    t.tar.push(await gnuTar());
    t.ours.push(await ours());
  }
  const base = median(t.tar);
  const mb = layer.uncompressedBytes;
  console.log(
    `\n(b) extract one gzip layer: ${layer.files} files, ${(mb / MiB).toFixed(0)} MiB uncompressed, ` +
      `${(layer.compressedBytes / MiB).toFixed(0)} MiB compressed; median of ${ROUNDS}`,
  );
  printTable(
    ['extractor', 'seconds', 'MiB/s (uncompressed)', 'throughput vs tar'],
    [
      ['GNU tar -xzf (baseline)', seconds(base), mibps(mb, base), '1.00'],
      ['agentd applyLayer', seconds(median(t.ours)), mibps(mb, median(t.ours)), ratio(base / median(t.ours))],
    ],
  );
  console.log('  target: >= 0.80');
}

async function benchInstall(mirror: MirrorProcess, work: string): Promise<void> {
  const config = agentConfigSchema.parse({
    ...makeAgentConfig(),
    Downloads: mirrorDownloads(mirror.baseUrl),
  });
  const dispatcher = new Agent().compose(interceptors.redirect({ maxRedirections: 5 }));
  const run = async (cacheDir: string) => {
    const rootfs = await mkdtemp(path.join(work, 'rootfs-'));
    const { ms, value } = await timed(() =>
      installArtifacts(config, rootfs, { arch: 'amd64', cacheDir, dispatcher }),
    );
    await rm(rootfs, { recursive: true, force: true });
    return { ms, ...value };
  };
  const cold: Array<Awaited<ReturnType<typeof run>>> = [];
  const warm: Array<Awaited<ReturnType<typeof run>>> = [];
  for (let i = 0; i < ROUNDS; i++) {
    const cacheDir = path.join(work, `install-cache-${i}`);
    cold.push(await run(cacheDir));
    warm.push(await run(cacheDir));
  }
  const coldMs = median(cold.map((r) => r.ms));
  const warmMs = median(warm.map((r) => r.ms));
  console.log(
    `\n(c) installArtifacts into a fresh rootfs (7 artifacts from the mirror), median of ${ROUNDS}`,
  );
  printTable(
    ['cache', 'seconds', 'artifact bytes downloaded', 'cache hits', 'time vs cold'],
    [
      [
        'cold (baseline)',
        seconds(coldMs),
        String(cold[0]?.downloadedBytes),
        String(cold[0]?.cacheHits),
        '1.00',
      ],
      [
        'warm',
        seconds(warmMs),
        String(warm[0]?.downloadedBytes),
        String(warm[0]?.cacheHits),
        ratio(warmMs / coldMs),
      ],
    ],
  );
  console.log('  expected: warm downloads 0 artifact bytes (checksum files are still fetched)');
  await dispatcher.close();
}

async function main(): Promise<void> {
  console.log(
    `agentd provisioning benchmark: node ${process.version}, ${os.cpus().length} CPUs, ${os.platform()}`,
  );
  const work = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-provision-'));
  const mirror = await startMirrorProcess();
  try {
    if (PARTS.includes('a')) await benchDownload(mirror, work);
    if (PARTS.includes('b')) await benchExtract(work);
    if (PARTS.includes('c')) await benchInstall(mirror, work);
  } finally {
    await mirror.stop();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
