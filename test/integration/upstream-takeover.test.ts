/**
 * The takeover through the real daemon (`--sim`): a host where the upstream agent's daemon is
 * enabled and running. agentd stops and disables it at start, says so once in its log and in
 * `status`, and stops it again before an update when someone enabled it meanwhile. A reset
 * removes what upstream's reset removes.
 */
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UPSTREAM_DAEMON_UNIT } from '../../src/host/upstream-daemon.js';
import { SIM_UPSTREAM_DAEMON_ACTIVE, SIM_UPSTREAM_DAEMON_WANTS } from '../../src/sim/host/host-commands.js';
import type { TestDaemon } from '../support/daemon.js';
import {
  exists,
  nodeStatus,
  rpcResult,
  startSimDaemon,
  updateAndWait,
} from '../support/provision-fixtures.js';
import { SIM_NETWORK_FILE } from '../../src/sim/host/network.js';

async function enableUpstream(root: string): Promise<void> {
  const unitDir = path.join(root, 'etc/systemd/system');
  await mkdir(path.join(unitDir, 'multi-user.target.wants'), { recursive: true });
  await writeFile(path.join(unitDir, UPSTREAM_DAEMON_UNIT), '[Service]\nRestart=always\n');
  await symlink(`../${UPSTREAM_DAEMON_UNIT}`, path.join(root, SIM_UPSTREAM_DAEMON_WANTS)).catch(
    () => undefined,
  );
  await mkdir(path.dirname(path.join(root, SIM_UPSTREAM_DAEMON_ACTIVE)), { recursive: true });
  await writeFile(path.join(root, SIM_UPSTREAM_DAEMON_ACTIVE), '');
}

describe('taking over from the upstream daemon through the daemon', () => {
  let d: TestDaemon;
  let dir: string;
  let root: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-takeover-'));
    root = path.join(dir, 'root');
    await enableUpstream(root);
    d = await startSimDaemon({ root });
  });
  afterAll(async () => {
    await d?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it('stops and disables it at start, and says so once in the log and in status', async () => {
    expect(await exists(path.join(root, SIM_UPSTREAM_DAEMON_WANTS))).toBe(false);
    expect(await exists(path.join(root, SIM_UPSTREAM_DAEMON_ACTIVE))).toBe(false);
    const status = await nodeStatus(d);
    expect(status.node.warnings.join('\n')).toContain(
      `agentd stopped and disabled the upstream agent's daemon ${UPSTREAM_DAEMON_UNIT} (it was enabled and running)`,
    );
    expect(
      d
        .logs()
        .split('\n')
        .filter((l) => l.includes('stopped and disabled the upstream')),
    ).toHaveLength(1);
  });

  it('stops it again before an update when it was enabled meanwhile', async () => {
    await enableUpstream(root);
    const op = await updateAndWait(d);
    expect(op.state, JSON.stringify(op.error)).toBe('succeeded');
    expect(await exists(path.join(root, SIM_UPSTREAM_DAEMON_WANTS))).toBe(false);
    expect(await exists(path.join(root, SIM_UPSTREAM_DAEMON_ACTIVE))).toBe(false);
    expect(
      d
        .logs()
        .split('\n')
        .filter((l) => l.includes('stopped and disabled the upstream')),
    ).toHaveLength(2);
  });

  it('reset removes the upstream daemon, its overlay network and its files, and nothing else', async () => {
    const network = {
      links: ['lo', 'eth0', 'wg51820', 'vxlan0'],
      rules: [
        { priority: '0', table: 'local' },
        { priority: '100', table: 51820 },
      ],
      routes: [{ table: 51820, route: 'default dev wg51820' }],
    };
    await writeFile(path.join(root, SIM_NETWORK_FILE), JSON.stringify(network));
    await mkdir(path.join(root, 'usr/local/bin'), { recursive: true });
    await writeFile(path.join(root, 'usr/local/bin/unbounded-agent'), 'ELF');
    await writeFile(path.join(root, 'usr/local/bin/crictl'), 'ELF');
    const op = await rpcResult<{ state: string }>(d, 'reset', { wait: true });
    expect(op.state).toBe('succeeded');
    const after = JSON.parse(await readFile(path.join(root, SIM_NETWORK_FILE), 'utf8')) as typeof network;
    expect(after.links).toEqual(['lo', 'eth0']);
    expect(after.rules.map((r) => r.priority)).toEqual(['0']);
    expect(after.routes).toEqual([]);
    expect(await exists(path.join(root, 'etc/systemd/system', UPSTREAM_DAEMON_UNIT))).toBe(false);
    expect(await exists(path.join(root, 'usr/local/bin/unbounded-agent'))).toBe(false);
    expect(await exists(path.join(root, 'usr/local/bin/crictl'))).toBe(true);
  });
});
