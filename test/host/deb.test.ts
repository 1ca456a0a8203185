/**
 * The .deb on real systemd and real dpkg: it installs (agentd in /usr/bin, the unit enabled and
 * started, ready when dpkg returns), serves a node, upgrades (a newer version restarts agentd and
 * leaves kubelet's machine running), and removes (saying which machines stay) and purges
 * cleanly. The tarball's install.sh refuses to install a second agentd beside it.
 */
import { copyFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNode, runningMachines, unitMainPid, unitState } from '../support/real-host/assert-node.js';
import { startJoinedNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';
import { ensureRelease } from '../support/release.js';

describe.skipIf(!requireRealHost())('the .deb on a real systemd host', { timeout: 180_000 }, () => {
  let node: RealNode;

  beforeAll(async () => {
    node = await startJoinedNode({ label: 'deb', install: 'deb' });
  }, 600_000);

  afterAll(async () => {
    await node?.stop();
  }, 120_000);

  it('installs agentd in /usr/bin with its unit enabled and serving', async () => {
    const status = await node.host.execOk(['dpkg-query', '-W', '-f', '${Status} ${Version}', 'agentd']);
    expect(status.stdout).toMatch(/^install ok installed /);
    expect((await node.host.execOk(['readlink', '-f', '/usr/bin/agentctl'])).stdout.trim()).toBe(
      '/usr/bin/agentd',
    );
    expect((await node.host.execOk(['systemctl', 'is-enabled', 'agentd.service'])).stdout.trim()).toBe(
      'enabled',
    );
    const unit = await node.host.execOk([
      'systemctl',
      'show',
      '-p',
      'FragmentPath',
      '--value',
      'agentd.service',
    ]);
    // systemd may name it through /lib, a symlink to usr/lib on a merged-/usr host.
    const real = await node.host.execOk(['readlink', '-f', unit.stdout.trim()]);
    expect(real.stdout.trim()).toBe('/usr/lib/systemd/system/agentd.service');
    await expectNode(node, { active: 'kube1', version: '1.34.0' });
  });

  it('the tarball’s install.sh refuses to install beside the package, changing nothing', async () => {
    const tarball = (await ensureRelease()).tarball;
    await copyFile(tarball, node.host.outside(`/root/${path.basename(tarball)}`));
    await node.host.execOk(['tar', '-xzf', `/root/${path.basename(tarball)}`, '-C', '/root']);
    const agentd = await unitMainPid(node, 'agentd.service');
    const res = await node.host.exec([`/root/${path.basename(tarball, '.tar.gz')}/install.sh`]);
    expect(res.exitCode, `${res.stdout}${res.stderr}`).toBe(1);
    expect(res.stderr).toContain('agentd is installed from the Debian package');
    for (const p of [
      '/usr/local/bin/agentd',
      '/usr/local/bin/agentctl',
      '/etc/systemd/system/agentd.service',
    ]) {
      expect((await node.host.exec(['test', '-e', p])).exitCode, `${p} was installed`).not.toBe(0);
    }
    expect(await unitMainPid(node, 'agentd.service')).toBe(agentd);
  });

  it('upgrades to a newer version: agentd restarts, kubelet machine keeps running', async () => {
    const version = (
      await node.host.execOk(['dpkg-query', '-W', '-f', '${Version}', 'agentd'])
    ).stdout.trim();
    const newer = `${version}+upgrade1`;
    // The same package under a newer version, as the next release would be.
    await node.host.execOk([
      'sh',
      '-c',
      `set -e; rm -rf /root/deb; dpkg-deb -R /root/agentd_${version}_amd64.deb /root/deb; sed -i "s/^Version: .*/Version: $1/" /root/deb/DEBIAN/control; dpkg-deb --root-owner-group -Zgzip -z1 -b /root/deb /root/agentd-newer.deb`,
      'sh',
      newer,
    ]);
    const agentdBefore = await unitMainPid(node, 'agentd.service');
    const machineBefore = await unitMainPid(node, 'systemd-nspawn@kube1.service');
    await node.host.execOk(['dpkg', '-i', '/root/agentd-newer.deb'], { timeoutMs: 300_000 });
    expect((await node.host.execOk(['dpkg-query', '-W', '-f', '${Version}', 'agentd'])).stdout.trim()).toBe(
      newer,
    );
    expect(await unitMainPid(node, 'agentd.service')).not.toBe(agentdBefore);
    expect(await unitMainPid(node, 'systemd-nspawn@kube1.service')).toBe(machineBefore);
    await node.waitReady();
    await expectNode(node, { active: 'kube1', version: '1.34.0' });
  });

  it('removes and purges cleanly; the machines are left to agentctl uninstall', async () => {
    const removed = await node.host.execOk(['dpkg', '-r', 'agentd'], { timeoutMs: 300_000 });
    expect(removed.stderr).toContain('the machines kube1 stay and the node keeps serving');
    expect(await unitState(node, 'agentd.service')).not.toBe('active');
    expect((await node.host.exec(['test', '-e', '/usr/bin/agentd'])).exitCode).not.toBe(0);
    expect((await node.host.exec(['test', '-e', '/etc/agentd/config.yaml'])).exitCode).toBe(0);
    expect(await runningMachines(node)).toEqual(['kube1']);
    await node.host.execOk(['dpkg', '-P', 'agentd'], { timeoutMs: 300_000 });
    for (const p of ['/etc/agentd', '/var/lib/agentd', '/usr/lib/systemd/system/agentd.service']) {
      expect((await node.host.exec(['test', '-e', p])).exitCode, `${p} is still there`).not.toBe(0);
    }
    const query = await node.host.exec(['dpkg-query', '-W', '-f', '${Status}', 'agentd']);
    expect(query.stdout).not.toMatch(/installed/);
  });
});
