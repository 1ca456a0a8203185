/**
 * The standby boot's `.nspawn` edit (src/host/standby-boot.ts): systemd-nspawn 252 reads a settings
 * file's `Parameters=` only with its `Boot=` (without it the machine booted its default target on
 * the real host), so both lines go in together, and both come out again, leaving agentd's file as
 * it was.
 */
import { mkdtemp, readFile, rm, mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createHostPaths } from '../../../src/host/paths.js';
import {
  bootsIntoStandby,
  renderStandbyTarget,
  setStandbyBoot,
  withStandbyBoot,
} from '../../../src/host/standby-boot.js';
import { renderNspawnSettings } from '../../../src/provision/files/nspawn-files.js';

describe('the standby boot', () => {
  const normal = renderNspawnSettings('kube2', ['/dev/kvm']);

  it('puts Boot=yes and the standby target first in [Exec], and takes both out again byte for byte', () => {
    const standby = withStandbyBoot(normal, true);
    expect(standby).toContain(
      '[Exec]\nBoot=yes\nParameters=systemd.unit=agentd-standby.target\nCapability=all\n',
    );
    expect(bootsIntoStandby(standby)).toBe(true);
    expect(bootsIntoStandby(normal)).toBe(false);
    // nspawn ignores Parameters= without Boot= (real systemd 252): so does the simulated host.
    expect(bootsIntoStandby(standby.replace('Boot=yes\n', ''))).toBe(false);
    expect(withStandbyBoot(standby, true)).toBe(standby);
    expect(withStandbyBoot(standby, false)).toBe(normal);
    expect(withStandbyBoot(normal, false)).toBe(normal);
  });

  it('adds an [Exec] section to a file without one', () => {
    expect(withStandbyBoot('[Network]\nVirtualEthernet=no\n', true)).toBe(
      '[Network]\nVirtualEthernet=no\n\n[Exec]\nBoot=yes\nParameters=systemd.unit=agentd-standby.target\n',
    );
  });

  it('edits the machine’s file in place, and names it when it is missing', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'agentd-standby-'));
    onTestFinished(() => rm(root, { recursive: true, force: true }));
    const paths = createHostPaths(root);
    await expect(setStandbyBoot(paths, 'kube2', true)).rejects.toThrow(/kube2\.nspawn/);
    await mkdir(path.dirname(paths.nspawnFile('kube2')), { recursive: true });
    await writeFile(paths.nspawnFile('kube2'), normal);
    await setStandbyBoot(paths, 'kube2', true);
    expect(bootsIntoStandby(await readFile(paths.nspawnFile('kube2'), 'utf8'))).toBe(true);
    await setStandbyBoot(paths, 'kube2', false);
    expect(await readFile(paths.nspawnFile('kube2'), 'utf8')).toBe(normal);
  });

  it('the target pulls in sysinit and D-Bus only, and may be booted into', () => {
    const unit = renderStandbyTarget();
    expect(unit).toContain('Requires=sysinit.target\n');
    expect(unit).toContain('Wants=dbus.socket systemd-journald.service\n');
    expect(unit).toContain('AllowIsolate=yes\n');
    expect(unit).not.toMatch(/basic\.target|multi-user|sockets\.target/);
  });
});
