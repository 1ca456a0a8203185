/**
 * Download failures while a joined node (kube1) updates to kube2, through the real daemon:
 * the update fails in `provision`, before anything stopped, so kube1 keeps serving, untouched
 * (its rootfs, nspawn files and applied config byte for byte), and nothing of kube2 is left.
 */
import { readFile } from 'node:fs/promises';
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
  sha256Hex,
  snapshotTree,
  startSimDaemon,
  updateAndWait,
  withVersion,
} from '../support/provision-fixtures.js';

describe('an update to kube2 whose download fails', () => {
  const faults: ArtifactFault[] = [];
  const requests: Array<{ method: string; path: string }> = [];
  let mirror: Mirror;
  let d: TestDaemon;
  let before: Record<string, string>;
  let appliedHash: string;

  beforeAll(async () => {
    mirror = await startMirror({ artifacts: { faults, onRequest: (r) => requests.push(r) } });
    d = await startSimDaemon();
    const join = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
    expect(join, JSON.stringify(join.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
    before = await snapshotTree(d.root, { ignore: [SIM_HOST_STATE] });
    appliedHash = sha256Hex(await readFile(appliedConfigPath(d.root, 'kube1')));
  });
  afterAll(async () => {
    await d?.dispose();
    await mirror?.close();
  });

  it.each(KUBELET_DOWNLOAD_FAULTS)('$name fails the update in provision; kube1 serves on', async (c) => {
    faults.splice(0, faults.length, { ...c.fault });
    requests.length = 0;

    const op = await updateAndWait(d, { config: withVersion(mirrorAgentConfig(mirror), '1.35.0') });
    expect(op).toMatchObject({ state: 'failed', from: 'kube1', to: 'kube2', error: { code: c.code } });
    expect(phaseOf(op, 'provision')).toMatchObject({ state: 'failed', error: { code: c.code } });
    for (const later of ['stage', 'stop', 'start', 'verify', 'commit', 'cleanup'])
      expect(phaseOf(op, later).state).toBe('skipped');
    expect(kubeletGets(requests)).toBe(c.attempts);

    // kube1 untouched and still serving; nothing of kube2 left; nothing partial in the caches.
    const status = await nodeStatus(d);
    expect(status.node).toMatchObject({
      activeMachine: 'kube1',
      applied: { kubernetesVersion: '1.34.0', hash: appliedHash },
      warnings: [],
    });
    expect(status.node.machines).toEqual([
      { name: 'kube1', state: 'running', kubelet: 'active' },
      { name: 'kube2', state: 'absent', kubelet: 'inactive' },
    ]);
    expect(sha256Hex(await readFile(appliedConfigPath(d.root, 'kube1')))).toBe(appliedHash);
    expect(await exists(path.join(d.root, 'var/lib/machines/kube2'))).toBe(false);
    expect(await exists(path.join(d.root, 'etc/systemd/nspawn/kube2.nspawn'))).toBe(false);
    expect(await exists(appliedConfigPath(d.root, 'kube2'))).toBe(false);
    expect(await snapshotTree(d.root, { ignore: [SIM_HOST_STATE] })).toEqual(before);
    expect(await badCacheEntries(path.join(d.stateDir, 'cache'))).toEqual([]);
  });
});
