/**
 * The tree agentd provisions is a runnable rootfs: a machine provisioned through the daemon
 * (from an image carrying busybox-static as `/bin/busybox` and `/bin/sh`) runs its kubelet
 * under the real `systemd-nspawn` (package systemd-container). Needs root, as nspawn does.
 * Skipped when systemd-nspawn or busybox is missing (or not root), unless
 * AGENTD_REQUIRE_SYSTEM_TESTS=1.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { startMirror } from '../../src/sim/mirror/index.js';
import {
  BUSYBOX,
  SYSTEM_TESTS_REQUIRED,
  busyboxImage,
  hasTool,
  mirrorAgentConfig,
  startSimDaemon,
  updateAndWait,
} from '../support/provision-fixtures.js';

const run = promisify(execFile);
const isRoot = process.getuid?.() === 0;
const available = hasTool('systemd-nspawn') && hasTool(BUSYBOX) && isRoot;

describe.skipIf(!available && !SYSTEM_TESTS_REQUIRED)('systemd-nspawn runs the provisioned rootfs', () => {
  it('kubelet --version runs inside the machine agentd provisioned', async () => {
    if (!available) {
      throw new Error(
        `AGENTD_REQUIRE_SYSTEM_TESTS=1 but systemd-nspawn or ${BUSYBOX} is missing or this is not root (packages systemd-container, busybox-static)`,
      );
    }
    const mirror = await startMirror({ image: busyboxImage });
    try {
      const d = await startSimDaemon();
      const op = await updateAndWait(d, { config: mirrorAgentConfig(mirror) });
      expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: 'kube1' });
      // The daemon is done with the tree; stop it so nothing else touches the rootfs.
      await d.stop();

      const rootfs = path.join(d.root, 'var/lib/machines/kube1');
      const nspawn = await run(
        'systemd-nspawn',
        ['--register=no', '--keep-unit', '-q', '-D', rootfs, '/usr/local/bin/kubelet', '--version'],
        { timeout: 60_000 },
      ).catch((err: { code?: number; stdout?: string; stderr?: string }) => {
        throw new Error(`systemd-nspawn failed (${err.code}): ${err.stderr ?? ''}${err.stdout ?? ''}`);
      });
      expect(nspawn.stdout.trim()).toBe('Kubernetes v1.34.0');
    } finally {
      await mirror.close();
    }
  });
});
