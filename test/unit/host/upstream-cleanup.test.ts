import { mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHostPaths } from '../../../src/host/paths.js';
import { removeUpstreamLeftovers } from '../../../src/host/upstream-cleanup.js';
import { SIM_NETWORK_FILE, type SimNetwork } from '../../../src/sim/host/network.js';
import { createSimHost } from '../../../src/sim/host/sim-host.js';

const silent = pino({ level: 'silent' });

async function put(root: string, rel: string, content = ''): Promise<void> {
  await mkdir(path.dirname(path.join(root, rel)), { recursive: true });
  await writeFile(path.join(root, rel), content);
}

describe('reset removes what the upstream agent left, and only that', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'agentd-upstream-cleanup-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('removes the daemon, overlay interfaces, rules and tables 51820-51899, keys and files', async () => {
    const network: SimNetwork = {
      links: [
        'lo',
        'eth0',
        'wg51820',
        'wg51821',
        'wgcorp',
        'geneve0',
        'vxlan0',
        'ipip0',
        'unbounded0',
        'cbr0',
        'cni0',
      ],
      rules: [
        { priority: '0', table: 'local' },
        { priority: '100', table: 51820 },
        { priority: '101', table: 51899 },
        { priority: '102', table: 51900 },
        { priority: '32766', table: 'main' },
      ],
      routes: [
        { table: 51820, route: 'default dev wg51820' },
        { table: 51821, route: '10.1.0.0/16 dev wg51821' },
        { table: 100, route: 'default via 10.0.0.1' },
      ],
    };
    await put(root, SIM_NETWORK_FILE, JSON.stringify(network));
    await put(root, 'etc/systemd/system/unbounded-agent-daemon.service', '[Service]\n');
    await mkdir(path.join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    await symlink(
      '../unbounded-agent-daemon.service',
      path.join(root, 'etc/systemd/system/multi-user.target.wants/unbounded-agent-daemon.service'),
    );
    await put(root, 'etc/systemd/system/unbounded-agent-daemon-recovery.service', '[Service]\n');
    await put(root, 'etc/systemd/system/agentd.service', '[Service]\n');
    await put(root, 'etc/wireguard/server.priv', 'KEY');
    await put(root, 'etc/wireguard/server.pub', 'PUB');
    await put(root, 'etc/wireguard/corp.conf', 'an operator’s tunnel');
    await put(root, 'usr/local/bin/unbounded-agent', 'ELF');
    await put(root, 'usr/local/bin/unbounded-agent-daemon-recovery.sh', '#!/bin/sh');
    await put(root, 'usr/local/bin/kubectl', 'ELF');
    await put(root, 'tmp/unbounded-agent/download.tar', 'x');
    await put(root, 'tmp/unbounded-agent-config.123.json', '{}');
    await put(root, 'tmp/other.json', '{}');

    const result = await removeUpstreamLeftovers({
      runner: createSimHost({ root }),
      paths: createHostPaths(root),
      logger: silent,
    });

    expect(result).toEqual({
      units: ['unbounded-agent-daemon.service', 'unbounded-agent-daemon-recovery.service'],
      links: ['wg51820', 'wg51821', 'geneve0', 'vxlan0', 'ipip0', 'unbounded0', 'cbr0'],
      rules: ['100', '101'],
      tables: [51820, 51821],
      // `systemctl disable` removed the wants link itself.
      files: [
        '/etc/systemd/system/unbounded-agent-daemon.service',
        '/etc/systemd/system/unbounded-agent-daemon-recovery.service',
        '/etc/wireguard/server.priv',
        '/etc/wireguard/server.pub',
        '/usr/local/bin/unbounded-agent',
        '/usr/local/bin/unbounded-agent-daemon-recovery.sh',
        '/tmp/unbounded-agent',
        '/tmp/unbounded-agent-config.123.json',
      ],
    });
    const after = JSON.parse(await readFile(path.join(root, SIM_NETWORK_FILE), 'utf8')) as SimNetwork;
    expect(after.links).toEqual(['lo', 'eth0', 'wgcorp', 'cni0']);
    expect(after.rules.map((r) => r.priority)).toEqual(['0', '102', '32766']);
    expect(after.routes).toEqual([{ table: 100, route: 'default via 10.0.0.1' }]);
    expect(await readdir(path.join(root, 'etc/systemd/system'))).toEqual([
      'agentd.service',
      'multi-user.target.wants',
    ]);
    expect(await readdir(path.join(root, 'etc/wireguard'))).toEqual(['corp.conf']);
    expect(await readdir(path.join(root, 'usr/local/bin'))).toEqual(['kubectl']);
    expect(await readdir(path.join(root, 'tmp'))).toEqual(['other.json']);
  });

  it('changes nothing on a host the upstream agent never ran on', async () => {
    const calls: string[] = [];
    const sim = createSimHost({ root });
    const result = await removeUpstreamLeftovers({
      runner: { run: (f, a, o) => (calls.push([f, ...a].join(' ')), sim.run(f, a, o)) },
      paths: createHostPaths(root),
      logger: silent,
    });
    expect(result).toEqual({ units: [], links: [], rules: [], tables: [], files: [] });
    expect(calls).toEqual(['ip -o link show', 'ip rule show', 'ip route show table all']);
  });
});
