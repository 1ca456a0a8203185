/**
 * Download failures during a join, through the real daemon: the daemon's downloads and image
 * point at a mirror this test runs (with fault hooks). Each failure ends the operation
 * `failed` in `provision` with a clear error code, and leaves the node exactly as it was: no
 * machine, no nspawn file, no applied config, nothing partial in the cache.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ArtifactFault } from '../../src/sim/mirror/artifacts.js';
import { startMirror, type Mirror } from '../../src/sim/mirror/index.js';
import type { TestDaemon } from '../support/daemon.js';
import {
  KUBELET_DOWNLOAD_FAULTS,
  SIM_HOST_STATE,
  appliedConfigPath,
  badCacheEntries,
  exists,
  kubeletGets,
  mirrorAgentConfig,
  nodeStatus,
  phaseOf,
  snapshotTree,
  startSimDaemon,
  updateAndWait,
} from '../support/provision-fixtures.js';

describe('a join whose download fails', () => {
  const faults: ArtifactFault[] = [];
  const requests: Array<{ method: string; path: string }> = [];
  let mirror: Mirror;
  let d: TestDaemon;
  let before: Record<string, string>;

  beforeAll(async () => {
    mirror = await startMirror({ artifacts: { faults, onRequest: (r) => requests.push(r) } });
    d = await startSimDaemon();
    // Files and links only: a failed join may leave the (empty) machines directory behind.
    before = await snapshotTree(d.root, { ignore: [SIM_HOST_STATE], dirs: false });
  });
  afterAll(async () => {
    await d?.dispose();
    await mirror?.close();
  });

  it.each(KUBELET_DOWNLOAD_FAULTS)('$name fails the join in provision with $code', async (c) => {
    faults.splice(0, faults.length, { ...c.fault });
    requests.length = 0;

    const op = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
    expect(op).toMatchObject({ state: 'failed', from: null, to: 'kube1', error: { code: c.code } });
    expect(phaseOf(op, 'preflight').state).toBe('succeeded');
    expect(phaseOf(op, 'provision')).toMatchObject({ state: 'failed', error: { code: c.code } });
    for (const later of ['stage', 'start', 'verify', 'commit'])
      expect(phaseOf(op, later).state).toBe('skipped');
    expect(op.error?.message).toMatch(/kubelet/);
    expect(kubeletGets(requests)).toBe(c.attempts);

    // Nothing of kube1 is left, and nothing partial in the caches.
    expect(await exists(path.join(d.root, 'var/lib/machines/kube1'))).toBe(false);
    expect(await readdir(path.join(d.root, 'var/lib/machines')).catch(() => [])).toEqual([]);
    expect(await exists(path.join(d.root, 'etc/systemd/nspawn/kube1.nspawn'))).toBe(false);
    expect(await exists(path.join(d.root, 'etc/systemd/system/systemd-nspawn@kube1.service.d'))).toBe(false);
    expect(await exists(appliedConfigPath(d.root, 'kube1'))).toBe(false);
    expect(await badCacheEntries(path.join(d.stateDir, 'cache'))).toEqual([]);
    expect(await snapshotTree(d.root, { ignore: [SIM_HOST_STATE], dirs: false })).toEqual(before);

    const status = await nodeStatus(d);
    expect(status.node).toMatchObject({ activeMachine: null, applied: null, warnings: [] });
    expect(status.node.machines.map((m) => m.state)).toEqual(['absent', 'absent']);
  });

  it('once the mirror is healthy again the same join succeeds', async () => {
    faults.length = 0;
    const op = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
    expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
    expect((await nodeStatus(d)).node.activeMachine).toBe('kube1');
    expect(await badCacheEntries(path.join(d.stateDir, 'cache'))).toEqual([]);
  });
});
