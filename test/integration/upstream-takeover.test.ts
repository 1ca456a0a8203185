/**
 * The takeover through the real daemon (`--sim`): a host where the upstream agent's daemon is
 * enabled and running. agentd stops and disables it at start, says so once in its log and in
 * `status`, and stops it again before an update when someone enabled it meanwhile.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UPSTREAM_DAEMON_UNIT } from '../../src/host/upstream-daemon.js';
import { SIM_UPSTREAM_DAEMON_ACTIVE, SIM_UPSTREAM_DAEMON_WANTS } from '../../src/sim/host/host-commands.js';
import type { TestDaemon } from '../support/daemon.js';
import { exists, nodeStatus, startSimDaemon, updateAndWait } from '../support/provision-fixtures.js';

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
});
