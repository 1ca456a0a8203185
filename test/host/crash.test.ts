/**
 * SIGKILL of agentd in the middle of a switch-over on real systemd: agentd dies at a failpoint
 * (armed through a unit drop-in, as `AGENTD_FAILPOINTS`), systemd restarts it (`Restart=always`),
 * and startup recovery leaves exactly one running, verified machine: the source when the crash
 * came before the commit point, the target after it. The operation ends `interrupted`. In the
 * cold order (`--switch-order cold`) and in the standby order at each of its states: the target
 * in standby, kubelet and containerd moved, the source powered off (docs/architecture.md, "Hot
 * standby"). After each restart exactly one machine runs (expectNode), and updates still work.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as delay } from 'node:timers/promises';
import { expectNode, type MachineName, type OperationJson } from '../support/real-host/assert-node.js';
import { agentdUnit, armFailpoints, disarmFailpoints, setSwitchOrder } from '../support/real-host/faults.js';
import { startJoinedNode, type RealNode } from '../support/real-host/node.js';
import { requireRealHost } from '../support/real-host/require.js';

describe.skipIf(!requireRealHost())(
  'SIGKILL mid switch-over on a real systemd host',
  { timeout: 240_000 },
  () => {
    let node: RealNode;

    beforeAll(async () => {
      node = await startJoinedNode({ label: 'crash' });
    }, 600_000);

    afterAll(async () => {
      await node?.stop();
    }, 120_000);

    // In order: each case starts from the node the previous one left. The cold order first
    // (chosen with --switch-order cold), then the standby order (the default) at its new points.
    const cases: Array<{
      point: string;
      order: 'cold' | 'standby';
      version: string;
      from: MachineName;
      ends: MachineName;
      endVersion: string;
    }> = [
      // the source is half stopped: kubelet and containerd are down, the machine still runs
      {
        point: 'cmd:machinectl disable kube1',
        order: 'cold',
        version: '1.35.0',
        from: 'kube1',
        ends: 'kube1',
        endVersion: '1.34.0',
      },
      // the source is stopped, the target not started: the node serves nothing
      {
        point: 'cmd:machinectl start kube2',
        order: 'cold',
        version: '1.35.0',
        from: 'kube1',
        ends: 'kube1',
        endVersion: '1.34.0',
      },
      // the target runs but is not verified yet
      {
        point: 'update.verify.before',
        order: 'cold',
        version: '1.35.0',
        from: 'kube1',
        ends: 'kube1',
        endVersion: '1.34.0',
      },
      // the target is committed, the source not cleaned up yet: recovery rolls forward
      {
        point: 'update.commit.after',
        order: 'cold',
        version: '1.35.0',
        from: 'kube1',
        ends: 'kube2',
        endVersion: '1.35.0',
      },
      // standby: the target's .nspawn file says standby, the target not booted
      {
        point: 'update.standby.mid',
        order: 'standby',
        version: '1.36.0',
        from: 'kube2',
        ends: 'kube2',
        endVersion: '1.35.0',
      },
      // the target booted in standby beside the serving source
      {
        point: 'update.standby.after',
        order: 'standby',
        version: '1.36.0',
        from: 'kube2',
        ends: 'kube2',
        endVersion: '1.35.0',
      },
      // services moved off the source (still booted), none in the target yet: nothing serves
      {
        point: 'update.stop.after',
        order: 'standby',
        version: '1.36.0',
        from: 'kube2',
        ends: 'kube2',
        endVersion: '1.35.0',
      },
      // kubelet and containerd started in the target, not verified; the source still booted
      {
        point: 'update.start.after',
        order: 'standby',
        version: '1.36.0',
        from: 'kube2',
        ends: 'kube2',
        endVersion: '1.35.0',
      },
      // committed, the source still booted (not powered off): recovery rolls forward
      {
        point: 'update.commit.after',
        order: 'standby',
        version: '1.36.0',
        from: 'kube2',
        ends: 'kube1',
        endVersion: '1.36.0',
      },
      // the source powered off in cleanup, not removed yet
      {
        point: 'update.cleanup.before-remove',
        order: 'standby',
        version: '1.37.0',
        from: 'kube1',
        ends: 'kube2',
        endVersion: '1.37.0',
      },
    ];

    for (const c of cases) {
      it(`${c.order} order, killed at ${c.point}: recovery leaves ${c.ends} running and verified`, async () => {
        await setSwitchOrder(node, c.order);
        await armFailpoints(node, [c.point]);
        await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
        await node.waitReady();
        const before = await agentdUnit(node);

        const started = await node.agentctlJson<OperationJson>([
          'update',
          '--kubernetes-version',
          c.version,
          '--detach',
        ]);
        expect(started).toMatchObject({ from: c.from });

        // The failpoint kills agentd; systemd restarts it after RestartSec. Disarm in between.
        const deadline = Date.now() + 120_000;
        for (;;) {
          const unit = await agentdUnit(node);
          if (Number(unit.NRestarts) > Number(before.NRestarts) || unit.SubState === 'auto-restart') break;
          if (Date.now() > deadline)
            throw new Error(`agentd did not die at ${c.point}\n${await node.journal()}`);
          await delay(100);
        }
        await disarmFailpoints(node);
        await node.waitReady(120_000);
        expect(Number((await agentdUnit(node)).NRestarts)).toBe(Number(before.NRestarts) + 1);
        expect(await node.journal(400)).toContain(`failpoint ${c.point}`);

        const op = await node.agentctlJson<OperationJson>(['ops', 'get', started.id]);
        expect(op.state).toBe('interrupted');
        await expectNode(node, { active: c.ends, version: c.endVersion });
      });
    }

    it('after every crash, the next update works, in either order', async () => {
      for (const [order, version, to] of [
        ['cold', '1.38.0', 'kube1'],
        ['standby', '1.39.0', 'kube2'],
      ] as const) {
        await setSwitchOrder(node, order);
        await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
        await node.waitReady();
        const op = await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', version]);
        expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to });
        expect(op.result).toMatchObject({ switchOrder: order });
        await expectNode(node, { active: to, version });
      }
    });
  },
);
