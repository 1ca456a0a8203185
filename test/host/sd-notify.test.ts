/**
 * agentd's `Type=notify` protocol on real systemd 252, through `systemd-notify` with the unit's
 * `NotifyAccess=main` (src/daemon/sd-notify.ts): the unit becomes active only once startup
 * recovery is done (a crash mid switch-over in the cold order left kube1 stopped, and recovery
 * must boot it back first: the longest recovery there is); the watchdog's pings arrive at half of `WatchdogSec=`; and a daemon that stops
 * answering (SIGSTOP) is killed and restarted by systemd once `WatchdogSec=` has passed, after
 * which the node is as it was.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNode, runningMachines, type OperationJson } from '../support/real-host/assert-node.js';
import { setSwitchOrder } from '../support/real-host/agentd-unit.js';
import { startJoinedNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

const DROP_IN_DIR = '/etc/systemd/system/agentd.service.d';

/** `systemctl show` properties of agentd.service. */
async function unit(node: RealNode, props: string[]): Promise<Record<string, string>> {
  const res = await node.host.execOk(['systemctl', 'show', '-p', props.join(','), 'agentd.service']);
  return Object.fromEntries(
    res.stdout
      .trim()
      .split('\n')
      .map((l) => {
        const i = l.indexOf('=');
        return [l.slice(0, i), l.slice(i + 1)] as [string, string];
      }),
  );
}

async function dropIn(node: RealNode, name: string, body: string | null): Promise<void> {
  const file = `${DROP_IN_DIR}/${name}.conf`;
  if (body === null) await node.host.execOk(['rm', '-f', file]);
  else {
    await node.host.execOk(['mkdir', '-p', DROP_IN_DIR]);
    await node.host.execOk(['sh', '-c', `printf '%s' "$1" > ${file}`, 'sh', body]);
  }
  await node.host.execOk(['systemctl', 'daemon-reload']);
}

/** What `agentctl status` says of the daemon: its state, or `unreachable`. */
async function daemonState(node: RealNode): Promise<string> {
  const res = await node.agentctl(['--json', 'rpc', 'status'], 10_000).catch(() => undefined);
  if (res?.code !== 0) return 'unreachable';
  return (JSON.parse(res.stdout) as { daemon?: { state?: string } }).daemon?.state ?? 'unknown';
}

describe.skipIf(!requireRealHost())('sd_notify on a real systemd host', { timeout: 240_000 }, () => {
  let node: RealNode;

  beforeAll(async () => {
    node = await startJoinedNode({ label: 'sdnotify' });
  }, 600_000);

  afterAll(async () => {
    await node?.stop();
  }, 120_000);

  it('the unit is active only once startup recovery has brought the node back', async () => {
    // Killed with kube1 stopped and kube2 not started: recovery must start and verify kube1. In
    // the cold order: in the standby order (the default) kube1 is still booted at that point.
    await setSwitchOrder(node, 'cold');
    await dropIn(
      node,
      'failpoint',
      '[Service]\nEnvironment="AGENTD_FAILPOINTS=cmd:machinectl start kube2"\n',
    );
    await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
    await node.waitReady();
    const before = await unit(node, ['MainPID', 'NRestarts']);
    await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', '1.35.0', '--detach']);

    // The failpoint kills agentd; disarm it while systemd waits RestartSec before the restart.
    const deadline = Date.now() + 120_000;
    for (;;) {
      const u = await unit(node, ['NRestarts', 'SubState']);
      if (Number(u.NRestarts) > Number(before.NRestarts) || u.SubState === 'auto-restart') break;
      if (Date.now() > deadline) throw new Error(`agentd did not die\n${await node.journal()}`);
      await delay(100);
    }
    await dropIn(node, 'failpoint', null);

    // Sample systemd's view first, then agentd's: a unit seen active had sent READY=1 before,
    // so agentd, asked after, must already say ready. Until then recovery runs.
    const samples: Array<{ active: string; daemon: string; kube1: boolean }> = [];
    const until = Date.now() + 120_000;
    for (;;) {
      const u = await unit(node, ['ActiveState', 'MainPID']);
      if (u.MainPID !== '0' && u.MainPID !== before.MainPID) {
        const kube1 = (await runningMachines(node)).includes('kube1');
        samples.push({ active: u.ActiveState ?? '', daemon: await daemonState(node), kube1 });
        if (u.ActiveState === 'active') break;
      }
      if (Date.now() > until) throw new Error(`agentd did not become active\n${await node.journal()}`);
      await delay(50);
    }
    // Recovery ran while the unit was activating: kube1 was still stopped, agentd recovering.
    const activating = samples.filter((s) => s.active === 'activating');
    expect(
      activating.some((s) => s.daemon === 'recovering' && !s.kube1),
      JSON.stringify(samples),
    ).toBe(true);
    // Active only once recovery was done: agentd ready and kube1 back.
    for (const s of samples.filter((x) => x.active === 'active')) {
      expect(s, JSON.stringify(samples)).toMatchObject({ daemon: 'ready', kube1: true });
    }
    const status = await node.host.execOk([
      'systemctl',
      'show',
      '-p',
      'StatusText',
      '--value',
      'agentd.service',
    ]);
    expect(status.stdout.trim()).toBe('serving on /run/agentd/agentd.sock');
    await expectNode(node, { active: 'kube1', version: '1.34.0' });
    await setSwitchOrder(node, 'standby');
    await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
    await node.waitReady();
  });

  it('pings the watchdog at half WatchdogSec', { timeout: 120_000 }, async () => {
    await dropIn(node, 'watchdog', '[Service]\nWatchdogSec=10s\n');
    await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
    await node.waitReady();
    const start = await unit(node, ['MainPID', 'NRestarts', 'WatchdogUSec']);
    expect(start.WatchdogUSec).toBe('10s');
    // systemd stamps the watchdog at READY=1 and at each WATCHDOG=1 (every 5 s here).
    const stamps = new Set<string>();
    const deadline = Date.now() + 30_000;
    while (stamps.size < 4) {
      expect(Date.now(), `watchdog stamps: ${[...stamps].join(', ')}`).toBeLessThan(deadline);
      stamps.add((await unit(node, ['WatchdogTimestampMonotonic'])).WatchdogTimestampMonotonic ?? '');
      await delay(500);
    }
    const stamped = [...stamps].map(Number).sort((a, b) => a - b);
    // The last three are pings, about 5 s apart, well within the 10 s limit.
    for (let i = stamped.length - 2; i < stamped.length; i += 1) {
      const gap = (stamped[i]! - stamped[i - 1]!) / 1e6;
      expect(gap).toBeGreaterThan(3);
      expect(gap).toBeLessThan(8);
    }
    expect(await unit(node, ['MainPID', 'NRestarts'])).toEqual({
      MainPID: start.MainPID,
      NRestarts: start.NRestarts,
    });
  });

  it(
    'a daemon that stops answering (SIGSTOP) is killed and restarted after WatchdogSec',
    { timeout: 120_000 },
    async () => {
      const before = await unit(node, ['MainPID', 'NRestarts', 'WatchdogUSec']);
      expect(before.WatchdogUSec).toBe('10s');
      // minbase has no kill(1): the shell's own.
      await node.host.execOk(['sh', '-c', 'kill -STOP "$1"', 'sh', before.MainPID!]);
      const stoppedAt = Date.now();
      const deadline = stoppedAt + 60_000;
      for (;;) {
        const u = await unit(node, ['MainPID', 'NRestarts', 'ActiveState']);
        if (u.MainPID !== before.MainPID && u.MainPID !== '0' && u.ActiveState === 'active') {
          expect(Number(u.NRestarts)).toBe(Number(before.NRestarts) + 1);
          break;
        }
        if (Date.now() > deadline) throw new Error(`agentd was not restarted\n${await node.journal()}`);
        await delay(200);
      }
      // Not before the watchdog's limit: the last ping may have come up to 5 s before the stop.
      expect(Date.now() - stoppedAt).toBeGreaterThan(4_000);
      expect(await node.journal(200)).toMatch(/Watchdog timeout/);
      await node.waitReady();
      await expectNode(node, { active: 'kube1', version: '1.34.0' });
      await dropIn(node, 'watchdog', null);
      await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
      await node.waitReady();
    },
  );
});
