/**
 * The fault matrix on a real systemd host, shared by test/host/fault-matrix-*.test.ts (docs/operations.md, "A full disk, exhausted
 * descriptors"; issue 40), the real-host side of test/integration/fault-matrix-*.test.ts: the
 * state dir's disk fills (/var/lib/agentd is a small tmpfs of its own, filled to ENOSPC), or
 * agentd's descriptors run out (RLIMIT_NOFILE lowered with prlimit to its lowest free descriptor),
 * at every phase of an update, of a rollback and of a startup recovery, with real machines,
 * machinectl and systemctl. The moment is a `stop:` failpoint armed through a unit drop-in:
 * agentd SIGSTOPs itself there, the fault is applied, SIGCONT. The fault lasts until the update
 * ends (or, in recovery, until agentd says it is ready). After each cell, once the fault is gone:
 * agentd never crashed (systemd restarted it only where the cell kills it), one machine serves,
 * running and verified, no other runs, the operation's true end is on disk, and the next cell's
 * update — or the last one here — works. Cells run in order on one node, each from the node the
 * previous one left.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectNode, type MachineName, type OperationJson, type StatusJson } from './assert-node.js';
import {
  FAULTS,
  agentdUnit,
  applyFault,
  armFailpoints,
  disarmFailpoints,
  expectCaughtUp,
  mountStateTmpfs,
  resume,
  waitLogged,
  waitStopped,
  type Fault,
} from './faults.js';
import { startJoinedNode, type RealNode } from './node.js';
import { requireRealHost } from './require.js';

/** kubelet 1.36.x never turns healthy here: an update to it rolls back. */
const UNHEALTHY = '1.36.0';

export interface Cell {
  /** The `stop:` failpoint where the fault hits. */
  point: string;
  /** The update goes to an unhealthy kubelet: the fault hits its rollback. */
  rollback?: boolean;
  /** A recovery cell: agentd is SIGKILLed here during the update, and the fault hits recovery. */
  crash?: string;
}

export const UPDATE: Cell[] = [
  'update.preflight.before',
  'update.provision.before',
  'update.stage.before',
  'update.stop.before',
  'update.start.before',
  'update.start.mid',
  'update.verify.before',
  'update.commit.before',
  'update.commit.mid',
  'update.cleanup.before',
].map((point) => ({ point }));
export const ROLLBACK: Cell[] = ['update.verify.before', 'update.rollback.before', 'update.rollback.mid'].map(
  (point) => ({
    point,
    rollback: true,
  }),
);
export const RECOVERY: Cell[] = ['update.verify.after', 'update.commit.after'].map((crash) => ({
  point: 'recovery.switch.mid',
  crash,
}));

const other = (m: MachineName): MachineName => (m === 'kube1' ? 'kube2' : 'kube1');

/**
 * One node, `cells` in order (each from the node the previous one left), then an update with
 * nothing armed. Two files run halves of the matrix, side by side (the suite runs three files at a time).
 */
export function describeFaultMatrix(label: string, cells: readonly Cell[]): void {
  describe.skipIf(!requireRealHost())(
    `fault matrix on a real systemd host (${label}): disk full and descriptors exhausted`,
    { timeout: 300_000 },
    () => {
      let node: RealNode;

      beforeAll(async () => {
        node = await startJoinedNode({ label: `faults-${label}`, unhealthyKubelet: '^1\\.36\\.' });
        await mountStateTmpfs(node);
      }, 600_000);

      afterAll(async () => {
        await node?.stop();
      }, 120_000);

      /** The machine that serves and its kubelet version, as agentd reports them. */
      const serving = async (): Promise<{ active: MachineName; version: string }> => {
        const status = await node.agentctlJson<StatusJson>(['status']);
        expect(status.node.activeMachine).not.toBeNull();
        return { active: status.node.activeMachine!, version: status.node.applied!.kubernetesVersion };
      };

      /** Restart agentd with `points` armed; answers the NRestarts count it starts with. */
      const restartArmed = async (points: string[]): Promise<number> => {
        await armFailpoints(node, points);
        await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
        await node.waitReady();
        return Number((await agentdUnit(node)).NRestarts);
      };

      const updateCell = async (cell: Cell, fault: Fault): Promise<void> => {
        const before = await serving();
        const version = cell.rollback ? UNHEALTHY : before.version === '1.34.0' ? '1.35.0' : '1.34.0';
        const restarts = await restartArmed([`stop:${cell.point}`]);
        const answer = node
          .agentctlJson<OperationJson>(['update', '--kubernetes-version', version, '--detach'])
          .catch((err: unknown) => err);
        const pid = await waitStopped(node, cell.point);
        const undo = await applyFault(node, fault, pid).finally(() => resume(node, pid));
        let id: string;
        try {
          const started = (await answer) as OperationJson;
          expect(started.id, `the update was admitted: ${JSON.stringify(started)}`).toEqual(
            expect.any(String),
          );
          id = started.id;
          await waitLogged(
            node,
            pid,
            `update ${id} to end`,
            (l) => typeof l.msg === 'string' && l.msg.startsWith(`update ${id} finished: `),
          );
          if (fault === 'disk-full') {
            // While the disk is still full, status says what agentd owes.
            const full = await node.agentctlJson<StatusJson>(['status']);
            expect(full.node.warnings.join('\n')).toMatch(
              /is not written yet|reserve for rollback and recovery is not whole/,
            );
          }
        } finally {
          await undo();
        }
        const op = await expectCaughtUp(node, id);
        expect(['succeeded', 'rolled_back', 'failed'], JSON.stringify(op)).toContain(op.state);
        if (cell.rollback) expect(op.state).not.toBe('succeeded');
        const active = op.state === 'succeeded' ? other(before.active) : before.active;
        // Every ending says which machine serves, never only the file that could not be written.
        if (op.state !== 'succeeded') expect(op.error?.message).toContain(`the node: ${active} serves`);
        await expectNode(node, { active, version: op.state === 'succeeded' ? version : before.version });
        const unit = await agentdUnit(node);
        expect(Number(unit.NRestarts), 'agentd never crashed').toBe(restarts);
        expect(Number(unit.MainPID)).toBe(pid);
        expect(await node.journal(2000)).not.toContain('operation crashed');
      };

      const recoveryCell = async (cell: Cell, fault: Fault): Promise<void> => {
        const before = await serving();
        const version = before.version === '1.34.0' ? '1.35.0' : '1.34.0';
        const restarts = await restartArmed([cell.crash!, `stop:${cell.point}`]);
        const started = await node.agentctlJson<OperationJson>([
          'update',
          '--kubernetes-version',
          version,
          '--detach',
        ]);
        // agentd dies at the crash point; systemd starts it again, and it stops in recovery.
        const pid = await waitStopped(node, cell.point);
        await disarmFailpoints(node);
        const undo = await applyFault(node, fault, pid).finally(() => resume(node, pid));
        try {
          await waitLogged(node, pid, 'agentd to be ready', (l) => l.msg === 'agentd ready');
        } finally {
          await undo();
        }
        const op = await expectCaughtUp(node, started.id);
        const committed = cell.crash === 'update.commit.after';
        const active = committed ? other(before.active) : before.active;
        expect(op.state).toBe('interrupted');
        expect(op.error, JSON.stringify(op.result?.recovery)).toBeNull();
        expect(op.result?.recovery).toMatchObject({
          outcome: committed ? `completed the switch to ${active}` : `rolled back to ${active}`,
          activeMachine: active,
        });
        await expectNode(node, { active, version: committed ? version : before.version });
        const unit = await agentdUnit(node);
        expect(Number(unit.NRestarts), 'systemd restarted agentd once: the crash').toBe(restarts + 1);
        expect(Number(unit.MainPID)).toBe(pid);
      };

      const named = cells.flatMap((cell) =>
        FAULTS.map((fault) => ({
          name: cell.crash
            ? `${fault} at ${cell.point} after a crash at ${cell.crash}`
            : `${fault} at ${cell.point}${cell.rollback ? ' (an unhealthy target: the rollback)' : ''}`,
          cell,
          fault,
        })),
      );
      it.each(named)('$name', async ({ cell, fault }) => {
        await (cell.crash ? recoveryCell(cell, fault) : updateCell(cell, fault));
      });

      it('with the faults gone and nothing armed, the next update works', async () => {
        await disarmFailpoints(node);
        await node.host.execOk(['systemctl', 'restart', 'agentd.service']);
        await node.waitReady();
        const before = await serving();
        const version = before.version === '1.34.0' ? '1.35.0' : '1.34.0';
        const op = await node.agentctlJson<OperationJson>(['update', '--kubernetes-version', version]);
        expect(op, JSON.stringify(op.error)).toMatchObject({ state: 'succeeded', to: other(before.active) });
        await expectNode(node, { active: other(before.active), version });
      });
    },
  );
}
