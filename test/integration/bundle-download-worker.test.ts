/**
 * The bundled daemon (dist/bin/agentd.js running dist/agentd.cjs, as `npm start`, the npm bins
 * and the release executable run it) hashes a large download on its download worker, loaded
 * from the bundle's own worker file dist/sink-worker.cjs (scripts/build.ts). A join pulls an
 * image whose layer is larger than the worker threshold; a copy of the bundle without the worker
 * file shows what the other case looks like: the same join succeeds with the bytes hashed inline,
 * and the daemon says so on stderr.
 */
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DOWNLOAD_WORKER_UNAVAILABLE,
  WORKER_SINK_MIN_BYTES,
  WORKER_SINK_MIN_CPUS,
} from '../../src/provision/artifacts/sink.js';
import { startMirror, type Mirror } from '../../src/sim/mirror/index.js';
import { createOciImage } from '../../src/sim/mirror/oci-image.js';
import { REPO_ROOT } from '../support/daemon.js';
import { mirrorAgentConfig, startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';

// Random bytes do not compress: the gzip layer is as large as the file.
const LARGE_FILE = randomBytes(WORKER_SINK_MIN_BYTES + 1024 * 1024);
const image = createOciImage({ extraFiles: [{ path: 'opt/large.bin', content: LARGE_FILE }] });
const largestBlob = Math.max(...[...image.blobs.values()].map((b) => b.data.length));

// On one CPU the worker is not used by design (src/provision/artifacts/sink.ts).
describe.skipIf(availableParallelism() < WORKER_SINK_MIN_CPUS)('the bundle’s download worker', () => {
  let mirror: Mirror;
  let copy: string;

  beforeAll(async () => {
    mirror = await startMirror({ image: () => image });
    // dist/bin/agentd.js and the bundle it loads, without dist/sink-worker.cjs beside them.
    copy = await mkdtemp(path.join(os.tmpdir(), 'agentd-bundle-copy-'));
    await mkdir(path.join(copy, 'bin'));
    await writeFile(path.join(copy, 'package.json'), '{ "type": "module" }\n');
    await copyFile(path.join(REPO_ROOT, 'dist/bin/agentd.js'), path.join(copy, 'bin/agentd.js'));
    // The bins are CommonJS by their own package.json (dist/bin/package.json).
    await copyFile(path.join(REPO_ROOT, 'dist/bin/package.json'), path.join(copy, 'bin/package.json'));
    for (const file of ['agentd.cjs', 'load-bundle.cjs'])
      await copyFile(path.join(REPO_ROOT, 'dist', file), path.join(copy, file));
  });
  afterAll(async () => {
    await mirror?.close();
    if (copy) await rm(copy, { recursive: true, force: true });
  });

  it('the image has a layer large enough for the worker', () => {
    expect(largestBlob).toBeGreaterThanOrEqual(WORKER_SINK_MIN_BYTES);
  });

  it('a join through dist/ hashes the large layer on the worker', async () => {
    const d = await startSimDaemon();
    const op = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
    expect(d.logs()).not.toContain(DOWNLOAD_WORKER_UNAVAILABLE);
  });

  it('without its worker file the bundle hashes inline and says why', async () => {
    const d = await startSimDaemon({ bin: path.join(copy, 'bin/agentd.js') });
    const op = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
    expect(d.logs()).toContain(DOWNLOAD_WORKER_UNAVAILABLE);
    expect(d.logs()).toContain('large downloads are hashed on the main thread');
  });
});
